"""GPEDConfig.matmul_precision: validated, part of the key only when set, and the TF32 switch set around the
teacher's minibatch pass on CUDA only and restored (on the CPU nothing changes, number for number)."""

from __future__ import annotations

import pytest
import torch

from gped_kit.core.schema import record
from gped_kit.engine import GPEDConfig, GPEDEngine, StudentConfig
from gped_kit.engine.precision import MATMUL_PRECISIONS, teacher_matmul_precision
from gped_kit.engine.spec import build_chain


def test_the_setting_is_checked_and_keyed_only_when_set():
    assert MATMUL_PRECISIONS == ("highest", "tf32")
    with pytest.raises(ValueError, match="GPEDConfig.matmul_precision='bf16'.*allowed"):
        GPEDConfig(matmul_precision="bf16")
    default, tf32 = record(GPEDConfig()), record(GPEDConfig(matmul_precision="tf32"))
    assert "matmul_precision" not in default and tf32.pop("matmul_precision") == "tf32" and tf32 == default


def test_the_switch_is_set_for_cuda_tf32_only_and_restored():
    flag = torch.backends.cuda.matmul
    before = flag.allow_tf32
    try:
        flag.allow_tf32 = False
        with teacher_matmul_precision("tf32", torch.device("cpu")):
            assert flag.allow_tf32 is False  # the CPU: nothing to switch
        with teacher_matmul_precision("highest", torch.device("cuda")):
            assert flag.allow_tf32 is False
        with teacher_matmul_precision("tf32", torch.device("cuda")):
            assert flag.allow_tf32 is True
        assert flag.allow_tf32 is False
        with pytest.raises(RuntimeError, match="inside"), teacher_matmul_precision("tf32", torch.device("cuda")):
            raise RuntimeError("inside")
        assert flag.allow_tf32 is False  # restored after an error too
    finally:
        flag.allow_tf32 = before


def test_on_the_cpu_tf32_changes_no_number(digits_data):
    def run(precision: str) -> list[float]:
        cfg = GPEDConfig(model="fcnn", num_iterations=30, burn_in=10, eval_thinning=5, log_every=15,
                         checkpoint_every=15, progress=False, device="cpu", matmul_precision=precision)
        engine = GPEDEngine([build_chain(digits_data, cfg, [StudentConfig("predictive", "U_s", thinning=2)])])
        engine.run()
        summary = engine.results()[0].summary
        assert (precision == "tf32") == ("matmul_precision" in summary)  # a column only where it is set
        return summary[["teacher_nll", "student_nll"]].iloc[0].tolist()

    assert run("highest") == run("tf32")
