"""What every figure of the kit stands on, below the experiments that draw them: :mod:`~gped_kit.plotting.theme`
is the kit's one plotting theme (fonts, grid, palette, a colour per method), applied by every plotting function
while it draws and undone when it returns; :mod:`~gped_kit.plotting.layout` the layout helpers (legends, series
styles, points off the scale, axis ranges, value labels); :mod:`~gped_kit.plotting.save` writes figures (PNG, PDF)
and tables (CSV, Markdown) without time stamps; :mod:`~gped_kit.plotting.tables` shows tables complete, missing
values as "—"; :mod:`~gped_kit.plotting.figures` draws a chain's outputs (learning curves, reliability, ...).
Each experiment's own figures are in its package's ``figures`` module. Nothing here imports an experiment."""
