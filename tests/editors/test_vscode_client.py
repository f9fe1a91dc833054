"""The VS Code client (`editors/vscode/extension.js`) under node's test runner, with VS Code and the language
client replaced by recorders (`editors/vscode/test/extension.test.js`): it starts `ppdsl lsp` over stdio with the
sizes as initializationOptions, restarts on a new `ppdsl.path`, and reports a server that cannot start. Node is
part of this project's machine (Node.js 20); the test needs no npm package."""

from __future__ import annotations

import shutil
import subprocess

from paths import ROOT

TESTS = ROOT / "editors" / "vscode" / "test"


def test_the_client_passes_under_node():
    node = shutil.which("node")
    assert node is not None, "node (Node.js 20) runs the extension's tests: `apt-get install nodejs`"
    result = subprocess.run([node, "--test", str(TESTS)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# pass 4" in result.stdout and "# fail 0" in result.stdout
