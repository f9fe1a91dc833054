"""The VS Code extension packages as the README says (issue 30): `npm ci` and `npx @vscode/vsce package` in a copy
of `editors/vscode` write a `.vsix` that holds the client, its grammar and its language client, and not its tests.
Under `-m e2e` (CI runs it): npm fetches about 250 packages, half a minute."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile

import pytest

from paths import ROOT

SOURCE = ROOT / "editors" / "vscode"


@pytest.mark.e2e
def test_the_extension_packages_into_a_vsix_with_what_it_runs(tmp_path):
    npm, npx = shutil.which("npm"), shutil.which("npx")
    assert npm and npx, "npm (Node.js 20) packages the extension: `apt-get install nodejs npm`"
    work = tmp_path / "vscode"
    shutil.copytree(SOURCE, work, ignore=shutil.ignore_patterns("node_modules", "*.vsix"))
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=work, check=True, capture_output=True, timeout=600)
    version = json.loads((SOURCE / "package.json").read_text())["version"]
    package = subprocess.run(
        [npx, "@vscode/vsce", "package", "--allow-missing-repository"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert package.returncode == 0, package.stdout + package.stderr
    vsix = work / f"ppdsl-{version}.vsix"  # the name the README's `code --install-extension` gives
    with zipfile.ZipFile(vsix) as archive:
        names = set(archive.namelist())
        manifest = json.loads(archive.read("extension/package.json"))
    for packed in ("extension.js", "syntaxes/sched.tmLanguage.json", "language-configuration.json"):
        assert f"extension/{packed}" in names
    assert any(n.startswith("extension/node_modules/vscode-languageclient/") for n in names)
    assert not any(n.startswith("extension/test/") for n in names)
    assert manifest["main"] == "./extension.js" and manifest["version"] == version
