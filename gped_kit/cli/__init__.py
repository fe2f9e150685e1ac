"""Command-line tools: :mod:`~gped_kit.cli.batch` executes the notebooks headlessly with papermill
(``python -m gped_kit.cli.batch --help``)."""
