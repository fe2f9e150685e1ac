"""The cluster start of docs/cluster.md ("One machine"), as written: ``ray start --head`` in a
subprocess with the venv's ``ray``, a driver that joins it through ``RAY_ADDRESS=127.0.0.1:PORT``
with ``RAY_AUTH_MODE=token``, two cells computed as tasks of that cluster, the cluster stopped.

Also the failure issue 25 met: once a token exists in ``~/.ray/auth_token`` (any local
``ray.init()`` writes one), ``ray start`` turns token authentication on, and a driver that joins
by address without ``RAY_AUTH_MODE=token`` is refused; gped-kit says what to set.

Isolated from the machine's other Ray clusters: the head's own ``--temp-dir`` (so the address it
records never redirects another process's address-less ``ray.init()``), a temporary ``HOME`` for
the token, and it is stopped by ending the ``ray start --block`` process (which stops the
processes it started) rather than ``ray stop``, which stops every Ray process of the machine.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

# `ray start --head` in a subprocess (about a minute): in `make test-slow`, which CI runs after `make test`.
pytestmark = pytest.mark.slow

pytest.importorskip("ray")  # installed by the set-up ('.[cluster]'), so CI runs this

REPO = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).with_name("ray")  # the venv's ray, as docs/cluster.md says (.venv/bin/ray)

DRIVER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, "tests")
    from conftest import make_digits_data
    import ray
    from gped_kit.core.sgld import SGLDConfig
    from gped_kit.engine import GPEDConfig, StudentConfig
    from gped_kit.experiments.chains import ChainTask, run_chains
    from gped_kit.experiments.store import ResultsStore

    data = make_digits_data(300)
    tasks = [ChainTask(data, GPEDConfig(model="fcnn", sampler=SGLDConfig(step_size=5e-5, prior_precision=10.0,
                                                                        batch_size=25),
                                        num_iterations=40, burn_in=10, eval_thinning=5, log_every=20,
                                        progress=False, device="cpu", seed=seed),
                       (StudentConfig("predictive", "U_s", thinning=2, batch_size=20),)) for seed in (0, 1)]
    grid = run_chains(tasks, ResultsStore(sys.argv[1]), progress=False, executor="ray")
    print(json.dumps({"status": list(grid.cells["status"]), "errors": [o.error for o in grid.outcomes],
                      "gcs_address": ray.get_runtime_context().gcs_address,
                      "resources": ray.cluster_resources()}))
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(log: Path, text: str, head: subprocess.Popen, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if head.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"`ray start --head` did not print {text!r} within {timeout} s:\n{log.read_text(errors='replace')}")


@pytest.mark.skipif(not RAY.exists(), reason=f"no ray executable beside {sys.executable}")
def test_documented_one_machine_cluster_start(tmp_path):
    temp_dir = Path(tempfile.mkdtemp(prefix="gped-ray-", dir="/tmp"))  # short: Ray's socket paths < 108 chars
    env = {**os.environ, "HOME": str(tmp_path / "home"), "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    documented = {**env, "RAY_AUTH_MODE": "token"}  # docs/cluster.md: exported before every command
    subprocess.run([str(RAY), "get-auth-token", "--generate"], env=documented, check=True, capture_output=True)
    port = free_port()
    log = tmp_path / "head.log"
    with open(log, "w") as out:
        head = subprocess.Popen([str(RAY), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                                 "--num-cpus=1", "--include-dashboard=false", f"--temp-dir={temp_dir}", "--block"],
                                env=documented, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(log, "Ray runtime started", head, timeout=90)
        joined = {"RAY_ADDRESS": f"127.0.0.1:{port}"}  # docs/cluster.md: export RAY_ADDRESS=127.0.0.1:6379
        script = tmp_path / "driver.py"
        script.write_text(DRIVER)

        # without RAY_AUTH_MODE=token the cluster refuses the driver, and the kit says what to set
        refused = subprocess.run([sys.executable, str(script), str(tmp_path / "refused")], env={**env, **joined},
                                 cwd=REPO, capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0
        # (Ray 2.52's traceback hook breaks the line after "ConnectionError:"; later releases do not)
        assert re.search(r"ConnectionError:\s+the Ray cluster at 127\.0\.0\.1:", refused.stderr), refused.stderr[-3000:]
        assert "Set RAY_AUTH_MODE=token" in refused.stderr
        assert not list((tmp_path / "refused").glob("chain/*/entry.json"))  # no cell computed

        # as documented: two cells computed as tasks of this cluster
        driver = subprocess.run([sys.executable, str(script), str(tmp_path / "store")],
                                env={**documented, **joined}, cwd=REPO, capture_output=True, text=True, timeout=180)
        assert driver.returncode == 0, driver.stdout[-3000:] + driver.stderr[-3000:]
        report = json.loads(driver.stdout.strip().splitlines()[-1])
        assert report["status"] == ["ran", "ran"], report["errors"]
        assert report["gcs_address"].endswith(f":{port}")  # the head started above, not a new local cluster
        assert report["resources"]["CPU"] == 1.0  # its --num-cpus
        assert len(list((tmp_path / "store" / "chain").glob("*/entry.json"))) == 2
        # the cells ran in worker processes of that head (its logs are under its own temp dir)
        worker_logs = "".join(p.read_text(errors="replace") for p in temp_dir.glob("session_*/logs/worker-*.out"))
        assert ":task_name:compute_batch" in worker_logs
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)
