"""The VS Code extension's manifest (`editors/vscode/package.json`): a workspace cannot choose the program the
extension starts. `ppdsl.path` is a user (`machine`) setting, and the extension declares how it runs in an
untrusted workspace, with `ppdsl.path` among the settings VS Code then takes from the user only."""

from __future__ import annotations

import json

from paths import ROOT

MANIFEST = ROOT / "editors" / "vscode" / "package.json"


def manifest() -> dict:
    return json.loads(MANIFEST.read_text(encoding="utf-8"))


def test_the_command_setting_is_the_users_only():
    props = manifest()["contributes"]["configuration"]["properties"]
    assert props["ppdsl.path"]["scope"] == "machine"  # not `machine-overridable`: a workspace value is ignored
    # every setting that names a program is the user's
    for name, prop in props.items():
        if prop.get("type") == "string":
            assert prop.get("scope") in ("machine", "application"), name


def test_untrusted_workspaces_are_declared_with_the_command_restricted():
    untrusted = manifest()["capabilities"]["untrustedWorkspaces"]
    assert untrusted["supported"] == "limited"
    assert untrusted["restrictedConfigurations"] == ["ppdsl.path"]
    assert untrusted["description"]
