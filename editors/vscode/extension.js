// The thin client: VS Code highlights `.sched` files with the TextMate grammar, and everything else (diagnostics,
// hover, navigation, completion, formatting) comes from `ppdsl lsp`, started here over stdio.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

const SECTION = "ppdsl";
let client;

/** The sizes the server checks schedules at (`null`: the file's own, else the server's default). */
function sizes() {
  const config = vscode.workspace.getConfiguration(SECTION);
  return {
    pp: config.get("pp", null),
    microbatches: config.get("microbatches", null),
    vpp: config.get("vpp", null),
  };
}

/**
 * The command started as `ppdsl lsp`: `ppdsl.path` of the user's settings, never a workspace's (a cloned repository
 * would choose the program the editor runs). The setting is `machine`-scoped, so VS Code ignores one in a
 * workspace anyway; this reads the user's value only, whatever the editor merges.
 */
function serverCommand() {
  const found = vscode.workspace.getConfiguration(SECTION).inspect("path");
  const value = found ? found.globalValue : undefined;
  return typeof value === "string" && value ? value : "ppdsl";
}

function newClient() {
  const command = serverCommand();
  const serverOptions = { command, args: ["lsp"], transport: TransportKind.stdio };
  const clientOptions = {
    documentSelector: [{ language: "sched" }],
    // The sizes at start-up, and each change of the `ppdsl` settings as workspace/didChangeConfiguration (the
    // server may also ask for them with workspace/configuration, section `ppdsl`).
    initializationOptions: sizes(),
    synchronize: { configurationSection: SECTION },
  };
  return new LanguageClient("ppdsl", "ppdsl", serverOptions, clientOptions);
}

async function start() {
  client = newClient();
  try {
    await client.start();
  } catch (err) {
    const command = serverCommand();
    vscode.window.showErrorMessage(
      `ppdsl: could not start \`${command} lsp\` (${err && err.message ? err.message : err}). ` +
        // ppdsl is not on PyPI: `pip install ppdsl` would find nothing (or another package)
        "Install ppdsl with its language server from a clone of its repository (`pip install -e '.[lsp]'` " +
        "in the clone), or set `ppdsl.path` to its command (e.g. `/home/me/.venv/bin/ppdsl`)."
    );
  }
}

async function restart() {
  if (client) {
    await client.stop().catch(() => undefined);
  }
  await start();
}

async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("ppdsl.restartServer", restart),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration(`${SECTION}.path`)) {
        restart(); // another command: another server
      }
    })
  );
  await start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate, sizes, serverCommand };
