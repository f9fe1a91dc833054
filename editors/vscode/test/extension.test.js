// The client without VS Code: `vscode` and `vscode-languageclient/node` replaced by recorders, so that what the
// extension asks for (the command, stdio, the sizes, the document selector, restarts) is checked with node alone:
// `node --test editors/vscode/test/`.
"use strict";

const assert = require("node:assert/strict");
const Module = require("node:module");
const path = require("node:path");
const test = require("node:test");

function fakes(settings) {
  const record = { clients: [], commands: {}, errors: [], configListeners: [] };
  const vscode = {
    workspace: {
      // `settings["ppdsl.path"]` is the user's value, `settings["workspace:ppdsl.path"]` a workspace's; `get` merges
      // them as VS Code would for a setting whose scope let a workspace set it
      getConfiguration: (section) => ({
        get: (key, fallback) => {
          const value = settings[`workspace:${section}.${key}`] ?? settings[`${section}.${key}`];
          return value === undefined ? fallback : value;
        },
        inspect: (key) => ({
          key: `${section}.${key}`,
          globalValue: settings[`${section}.${key}`],
          workspaceValue: settings[`workspace:${section}.${key}`],
        }),
      }),
      onDidChangeConfiguration: (listener) => record.configListeners.push(listener),
    },
    commands: { registerCommand: (name, fn) => (record.commands[name] = fn) },
    window: { showErrorMessage: (message) => record.errors.push(message) },
  };
  class LanguageClient {
    constructor(id, name, serverOptions, clientOptions) {
      Object.assign(this, { id, name, serverOptions, clientOptions, started: 0, stopped: 0 });
      record.clients.push(this);
    }
    async start() {
      this.started += 1;
      if (settings.failToStart) throw new Error("spawn ppdsl ENOENT");
    }
    async stop() {
      this.stopped += 1;
    }
  }
  const client = { LanguageClient, TransportKind: { stdio: 0 } };
  return { vscode, client, record };
}

function load(settings) {
  const { vscode, client, record } = fakes(settings);
  const original = Module._load;
  Module._load = function (request, ...rest) {
    if (request === "vscode") return vscode;
    if (request === "vscode-languageclient/node") return client;
    return original.call(this, request, ...rest);
  };
  const file = path.join(__dirname, "..", "extension.js");
  delete require.cache[require.resolve(file)];
  try {
    return { extension: require(file), record };
  } finally {
    Module._load = original;
  }
}

test("starts `ppdsl lsp` over stdio with the sizes as initializationOptions", async () => {
  const { extension, record } = load({ "ppdsl.pp": 4, "ppdsl.microbatches": 8 });
  await extension.activate({ subscriptions: [] });
  assert.equal(record.clients.length, 1);
  const [client] = record.clients;
  assert.deepEqual(client.serverOptions, { command: "ppdsl", args: ["lsp"], transport: 0 });
  assert.deepEqual(client.clientOptions.initializationOptions, { pp: 4, microbatches: 8, vpp: null });
  assert.deepEqual(client.clientOptions.documentSelector, [{ language: "sched" }]);
  assert.equal(client.clientOptions.synchronize.configurationSection, "ppdsl");
  assert.equal(client.started, 1);
});

test("`ppdsl.path` names the command; changing it restarts the server", async () => {
  const settings = { "ppdsl.path": "/opt/venv/bin/ppdsl" };
  const { extension, record } = load(settings);
  await extension.activate({ subscriptions: [] });
  assert.equal(record.clients[0].serverOptions.command, "/opt/venv/bin/ppdsl");
  settings["ppdsl.path"] = "ppdsl2";
  for (const listener of record.configListeners) listener({ affectsConfiguration: (s) => s === "ppdsl.path" });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(record.clients[0].stopped, 1);
  assert.equal(record.clients.length, 2);
  assert.equal(record.clients[1].serverOptions.command, "ppdsl2");
});

test("the restart command makes a new client; a server that cannot start is an error message", async () => {
  const { extension, record } = load({ failToStart: true });
  await extension.activate({ subscriptions: [] });
  assert.match(record.errors[0], /could not start `ppdsl lsp` \(spawn ppdsl ENOENT\)/);
  // the install command that works: ppdsl is not on PyPI
  assert.match(record.errors[0], /`pip install -e '\.\[lsp\]'` in the clone/);
  assert.doesNotMatch(record.errors[0], /pip install ppdsl/);
  await record.commands["ppdsl.restartServer"]();
  assert.equal(record.clients.length, 2);
  await extension.deactivate();
  assert.equal(record.clients[1].stopped, 1);
});

test("a workspace's `ppdsl.path` is never the command started", async () => {
  const { extension, record } = load({ "workspace:ppdsl.path": "./tools/evil" });
  await extension.activate({ subscriptions: [] });
  assert.equal(record.clients[0].serverOptions.command, "ppdsl");
  const user = load({ "ppdsl.path": "/opt/venv/bin/ppdsl", "workspace:ppdsl.path": "./tools/evil" });
  await user.extension.activate({ subscriptions: [] });
  assert.equal(user.record.clients[0].serverOptions.command, "/opt/venv/bin/ppdsl");
});
