"""aiogroup's pytest plugin, as a user meets it: a fresh project, pytest in a subprocess.

The user tests are the code blocks of ``docs/testing-with-pytest.md`` (each starts with a
``# test_<name>.py`` line), copied verbatim, and run with no ``pytest_plugins`` line and no
conftest: in pytest-asyncio's default strict mode and in auto mode. The plugin must also not
register twice when a project still lists ``pytest_plugins = ["aiogroup.testing.fixtures"]``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.timeout(240)

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing-with-pytest.md"
_BLOCK = re.compile(r"```python\n# (test_\w+\.py)\n(.*?)```", re.DOTALL)

#: A project's whole pytest configuration: strict mode is pytest-asyncio's default.
INI = """
[pytest]
asyncio_default_fixture_loop_scope = function
{extra}
"""


def doc_tests() -> dict[str, str]:
    """``{file name: source}`` of every user test file the page shows."""
    found = {name: f"# {name}\n{body}" for name, body in _BLOCK.findall(DOC.read_text())}
    assert "test_billing.py" in found, f"no '# test_billing.py' block in {DOC}"
    return found


def run(pytester: pytest.Pytester, *args: str, extra: str = "") -> pytest.RunResult:
    pytester.makeini(INI.format(extra=extra))
    for name, source in doc_tests().items():
        pytester.makepyfile(**{name.removesuffix(".py"): source})
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def expected_tests() -> int:
    return sum(len(re.findall(r"^(?:async )?def test_", s, re.M)) for s in doc_tests().values())


def test_the_documented_tests_pass_in_strict_mode(pytester: pytest.Pytester) -> None:
    result = run(pytester)
    result.assert_outcomes(passed=expected_tests())
    result.stdout.fnmatch_lines(["*plugins:*aiogroup-*", "asyncio: mode=*STRICT*"])


def test_the_documented_tests_pass_in_auto_mode(pytester: pytest.Pytester) -> None:
    result = run(pytester, extra="asyncio_mode = auto")
    result.stdout.fnmatch_lines(["asyncio: mode=*AUTO*"])
    result.assert_outcomes(passed=expected_tests())


def test_an_explicit_pytest_plugins_line_does_not_register_twice(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest('pytest_plugins = ["aiogroup.testing.fixtures"]\n')
    result = run(pytester)
    result.assert_outcomes(passed=expected_tests())


def test_kafka_broker_markers_are_registered(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI.format(extra=""))
    pytester.makepyfile(
        test_kinds="""
        def test_kind(kafka_broker):
            assert kafka_broker.bootstrap
        """
    )
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-q",
        "--strict-markers",
        "-m",
        "not tansu and not kafka23 and not kafka4 and not kafka39 and not docker",
    )
    result.assert_outcomes(passed=1, deselected=5)


def test_the_plugin_can_be_switched_off(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI.format(extra=""))
    pytester.makepyfile(
        test_off="""
        def test_uses(threaded_broker):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "-p", "no:aiogroup")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'threaded_broker' not found*"])


#: A project whose session fixture starts a server process and stops it by pid at teardown,
#: and whose test says READY, then waits (as a test stuck on a broker would).
SIGTERM_PROJECT = '''
import os, signal, subprocess, sys, threading
import pytest

@pytest.fixture(scope="session")
def server(tmp_path_factory):
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    yield proc
    proc.kill()  # ours, by pid
    proc.wait()
    with open(os.environ["TORN_DOWN"], "w") as f:
        f.write(str(proc.pid))

def test_stuck(server):
    print("READY", server.pid, flush=True)
    threading.Event().wait(600)
'''


def test_sigterm_tears_the_session_fixtures_down(pytester: pytest.Pytester) -> None:
    """A run killed with SIGTERM stops what its fixtures started (pytest alone does not)."""
    import os
    import signal
    import subprocess
    import sys

    pytester.makeini(INI.format(extra=""))
    pytester.makepyfile(test_stuck=SIGTERM_PROJECT)
    marker = pytester.path / "torn-down"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-q", "-p",
         "no:randomly", "-p", "no:xdist", "test_stuck.py"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TORN_DOWN": str(marker)},
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:  # blocks until the test runs
            lines.append(line)
            if line.startswith("READY"):
                break
        else:
            raise AssertionError("".join(lines))
        server_pid = int(line.split()[1])
        proc.send_signal(signal.SIGTERM)
        rest = proc.stdout.read()
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert marker.read_text() == str(server_pid), rest
    assert not Path(f"/proc/{server_pid}").exists()
    assert code == 2, rest  # pytest's "interrupted"
    assert "KeyboardInterrupt" in rest and "SIGTERM" in rest, rest
