"""Golden numbers: a number of a stored result may change only with its kind's numerics version.

Stored results are keyed by declared numerics versions (:mod:`gped_kit.experiments.numerics`), not by the
code's text, so a refactor re-keys nothing, and these tests are what makes that safe. Each probe of
``golden_probes.py`` computes short versions of the store's computations (every sampler, target, estimator
and kind of derived result) into a scratch store; every number they store is compared with the values
recorded for the current versions under ``tests/test_golden/`` (one CSV per probe and entry, named with
the entry's numerics code, e.g. ``search--search-0--chain1-search1.csv``), and every entry's key with the
recorded keys (``search--keys--chain1+chain1-search1.yml``). When the numbers of a kind move under an
unchanged version, the failure names the kind and the version to bump. After a bump there are no values for
the new version yet: the first run records them and fails once (pytest-regressions), the next one checks
them; commit them with the bump and remove the old version's files
(:func:`test_every_golden_file_belongs_to_a_current_version` lists them).

**Tolerance** (:data:`~gped_kit.experiments.numerics.SHORT_RUN_TOLERANCES`, numpy's ``isclose``:
|obtained - recorded| <= atol + rtol |recorded|). Two CPUs compute the same float32 programs with different
vector kernels, so their last bits differ and a chain amplifies them. Measured on one 2-core x86-64 CPU by
running every probe with torch's AVX2 kernels and with its scalar ones (``ATEN_CPU_CAPABILITY=default``):
the values on no discrete grid differed by at most 6.6e-4 absolute and 1.4e-4 relative (a student's
training loss of 4.86 after 80 steps); the values on a discrete grid
(:data:`~gped_kit.experiments.numerics.DISCRETE_VALUES`: accuracies, AUROC, nDCG) by at most 1.7e-3 (two of
1,197 digits changing class). One thread against two changed less (5.7e-6 and 9.8e-5), a second run on the
same CPU nothing. The tolerances hold those with a margin of 3 to 4; a wrong sampler, estimator or data
transform moves the probes' numbers by far more, and even subtle changes show: a 1% larger SGLD noise,
Adam's epsilon 1e-6 instead of 1e-8 and masks one pixel smaller moved 166, 8 and 250 of the FCNN probe's
617 numbers beyond the tolerances (``test_a_changed_numeric_is_caught``). The probes are short on purpose:
a chain of thousands of steps amplifies the same last-bit differences to percents
(:data:`~gped_kit.experiments.numerics.LONG_CHAIN_TOLERANCE`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from golden_probes import PROBES, run_probe

from gped_kit.core import sgld
from gped_kit.data import experiment
from gped_kit.engine import engine
from gped_kit.experiments import numerics

#: numpy ``isclose`` tolerances of the golden values, for the values on no discrete grid (``value``) and on one
#: (``discrete``); see the module docstring for how they were measured.
TOLERANCES = {column: dict(tolerance) for column, tolerance in numerics.SHORT_RUN_TOLERANCES.items()}
GOLDEN = Path(__file__).with_suffix("")


def slug(code: str) -> str:
    """A numerics code as a file-name part: ``"chain=1,search=1"`` -> ``"chain1-search1"``."""
    return code.replace("=", "").replace(",", "-")


def basename(probe: str, label: str) -> str:
    """The golden file's name (without suffix) of entry ``label`` (``"search 0"``) of ``probe``."""
    kind, n = label.split()
    return f"{probe}--{kind}-{n}--{slug(numerics.numerics_code(kind))}"


def keys_basename(probe: str, labels: list[str]) -> str:
    """The name of the file of ``probe``'s keys: the numerics codes of its entries' kinds."""
    kinds = sorted({label.split()[0] for label in labels})
    return f"{probe}--keys--{'+'.join(slug(numerics.numerics_code(kind)) for kind in kinds)}"


def what_to_bump(kind: str) -> str:
    own = numerics.KEYED_BY[kind][-1]
    line = (f"bump NUMERICS[{own!r}] (now {numerics.NUMERICS[own]}) in gped_kit/experiments/numerics.py, so that "
            f"the stored {kind} results are recomputed instead of reused")
    if numerics.KEYED_BY[kind][:-1]:
        line += f"; if the chain probes moved too, bump NUMERICS['chain'] instead (every {kind} is keyed by it)"
    return line


def added_numbers(recorded: Path, obtained: pd.DataFrame) -> list[str] | None:
    """The ``table/column`` names of the numbers ``obtained`` holds beyond the golden file ``recorded``, when
    every recorded number is still there (same table, row and column) within :data:`TOLERANCES`; None when a
    recorded number moved or is gone (or there is no file). A new metric adds numbers without moving any: the
    stored results of the version simply lack it, so no bump is due, only a new recording."""
    if not recorded.exists():
        return None
    old = pd.read_csv(recorded, index_col=0)
    keys = ["table", "row", "column"]
    both = old.merge(obtained, on=keys, how="left", suffixes=("", "_now"), indicator=True)
    if (both["_merge"] != "both").any():
        return None
    for column, tolerance in TOLERANCES.items():
        was, now = both[column].to_numpy(dtype=float), both[f"{column}_now"].to_numpy(dtype=float)
        if not np.isclose(now, was, equal_nan=True, **tolerance).all():
            return None
    new = obtained.merge(old[keys], on=keys, how="left", indicator=True)
    new = new[new["_merge"] == "left_only"]
    return sorted(set(new["table"] + "/" + new["column"]))


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """Each probe's numbers, computed once per test session (on demand)."""
    cache: dict[str, dict] = {}

    def get(probe: str) -> dict:
        if probe not in cache:
            cache[probe] = run_probe(probe, tmp_path_factory.mktemp(probe))
        return cache[probe]
    return get


@pytest.mark.parametrize("probe", list(PROBES))
def test_numbers_match_the_golden_values_of_their_numerics_version(probe, computed, dataframe_regression,
                                                                     data_regression, request):
    """Every number the probe stores equals the recorded value of its kind's numerics version, within
    :data:`TOLERANCES`; every entry's key equals the recorded one (a key that changes although no version did
    means a configuration record or a data identity changed: every stored result of that kind would be
    recomputed)."""
    found = computed(probe)
    assert found, f"probe {probe} stored nothing"
    recorded = []  # values recorded now (none yet for this version): every file is written before failing

    def check(regression, data, name: str, **options) -> None:
        try:
            regression.check(data, basename=name, **options)
        except pytest.fail.Exception as exc:
            recorded.append(str(exc).splitlines()[-1].strip("- "))

    for label, (_, table) in found.items():
        kind = label.split()[0]
        added = added_numbers(GOLDEN / f"{basename(probe, label)}.csv", table)
        if added and not request.config.getoption("force_regen"):
            pytest.fail(f"probe {probe!r}, entry {label!r}: numbers were added ({', '.join(added)}) and none of the "
                        f"recorded ones moved under the numerics {numerics.numerics_code(kind)}: no bump is due "
                        "(stored results of this version lack the new numbers); record them: "
                        "pytest tests/test_golden.py --force-regen, and commit the golden files")
        try:
            check(dataframe_regression, table, basename(probe, label), tolerances=TOLERANCES)
        except AssertionError as exc:
            raise AssertionError(f"the numbers of {kind} results moved (probe {probe!r}, entry {label!r}) under "
                                 f"the unchanged numerics {numerics.numerics_code(kind)}: a number may change only "
                                 f"with a version bump: {what_to_bump(kind)}.\n\n{exc}") from None
    keys = {label: key for label, (key, _) in found.items()}
    try:
        check(data_regression, keys, keys_basename(probe, list(keys)))
    except AssertionError as exc:
        raise AssertionError(f"the keys of probe {probe!r} changed although no numerics version did: a "
                             "configuration record or a data identity changed, which re-keys every stored result "
                             "of its kind (docs/store.md).\n\n" + str(exc)) from None
    if recorded:
        pytest.fail("no golden values were recorded for these numerics versions; recorded now (check and commit "
                    "them): " + ", ".join(recorded))


def test_every_golden_file_belongs_to_a_current_version():
    """No golden values of a superseded numerics version (or of a probe that is gone) lie around: after a
    bump the old version's files are removed."""
    current = {slug(numerics.numerics_code(kind)) for kind in numerics.KEYED_BY}
    stale = []
    for path in sorted(GOLDEN.iterdir()):
        probe, what, code = (path.stem.split("--") + ["", ""])[:3]
        if what == "keys":
            fresh = all(part in current for part in code.split("+"))
        else:
            kind = what.rsplit("-", 1)[0]
            fresh = kind in numerics.KEYED_BY and code == slug(numerics.numerics_code(kind))
        if probe not in PROBES or not fresh:
            stale.append(path.name)
    assert GOLDEN.is_dir() and not stale, f"golden files of no current probe or numerics version: {stale}"


def beyond_tolerance(probe: str, root: Path) -> int:
    """How many of ``probe``'s numbers, computed into ``root``, lie beyond :data:`TOLERANCES` of the recorded ones."""
    count = 0
    for label, (_, table) in run_probe(probe, root).items():
        recorded = pd.read_csv(GOLDEN / f"{basename(probe, label)}.csv", index_col=0)
        both = recorded.merge(table, on=["table", "row", "column"], how="outer", suffixes=("", "_now"), indicator=True)
        count += int((both["_merge"] != "both").sum())  # a number gone or new (e.g. a reliability bin emptied)
        both = both[both["_merge"] == "both"]
        for column, tol in TOLERANCES.items():
            diff = (both[f"{column}_now"] - both[column]).abs()
            count += int((diff > tol["atol"] + tol["rtol"] * both[column].abs()).sum())
    return count


@pytest.mark.parametrize("change", ["sgld_noise", "adam_eps", "mask_size"])
def test_a_changed_numeric_is_caught(change, tmp_path, monkeypatch):
    """The tolerances are no blanket: changes far smaller than a wrong formula (a 1% larger SGLD noise, Adam's
    epsilon 1e-6 instead of 1e-8, masks one pixel smaller) move the FCNN probe's numbers beyond them (166, 8
    and 250 of its 617 when measured)."""
    if change == "sgld_noise":
        coefficients = sgld.SGLDConfig.coefficients
        monkeypatch.setattr(sgld.SGLDConfig, "coefficients",
                            lambda self, n: (*coefficients(self, n)[:2], coefficients(self, n)[2] * 1.01))
    elif change == "adam_eps":
        update = engine.adam_update_
        monkeypatch.setattr(engine, "adam_update_", lambda *args, **kwargs: update(*args, **kwargs, eps=1e-6))
    else:
        mask = experiment.apply_square_mask
        monkeypatch.setattr(experiment, "apply_square_mask", lambda images, size, seed: mask(images, size - 1, seed))
    assert beyond_tolerance("fcnn_sgld_targets", tmp_path) >= 5
