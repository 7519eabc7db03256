"""Local servers: a taken port is one clear error before anything claims to be serving."""

import socket

import pytest
from conftest import gitmem_process


@pytest.mark.parametrize("argv", [["ui"], ["emulator", "serve"], ["router", "serve"]])
def test_a_taken_port_is_one_error_and_nothing_says_it_is_serving(repo, argv):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        result = gitmem_process(repo, *argv, "--port", str(port), check=False, timeout=60)  # serving would block
    finally:
        taken.close()
    assert result.returncode == 1
    expected = f"Error: cannot listen on 127.0.0.1:{port}: Address already in use (choose another with --port)"
    assert result.stderr.strip() == expected
    assert "serving" not in result.stdout + result.stderr and "http://" not in result.stdout
