// The port's engine in a real browser (Node; docs/browsers.md, docs/protocol.md):
//   node port_ts/browser/engine.ts --browser chromium|firefox|webkit run [--kernel auto|js|wasm]
//   node port_ts/browser/engine.ts --browser chromium|firefox|webkit check   (is it installed? exit 0, or 2 and its install command)
// speaks the protocol exactly as port_ts/src/cli.ts does: the request on stdin, one golden
// document per case (and the training states, replays, full pretrained documents) in out_dir,
// one status line per case on stdout as each finishes, exit 0 once the request was read. The
// cases run in the browser, in a module worker of a page served from 127.0.0.1 (server.ts, the
// page port_ts/browser/page/host.html); this process only serves the files, writes what the page
// sends, and prints the status lines, each with "browser": {"name", "version"} added.
//
// Exit 2, one line on stderr: a malformed request (as cli.ts), a browser that is not installed
// (with its install command), or a browser that could not run the request at all.

import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { BROWSERS, Fail, exitAfter, failureLine, type BrowserName, type OpenBrowser, cleanup, executables, openBrowser } from "./browsers.ts";
import { serve } from "./server.ts";

const KERNELS = ["auto", "js", "wasm"];
const START_TIMEOUT_MS = 120_000; // from the page's load to the worker's first word
const USAGE = `usage: engine.ts --browser ${BROWSERS.join("|")} run [--kernel ${KERNELS.join("|")}] | check`;


interface Request {
  out_dir: string; cases: { id: string; kind?: string }[]; replay?: Record<string, unknown>;
  assets?: Record<string, unknown>; inputs_from?: Record<string, unknown>; kernel?: unknown;
}

/** The request from stdin, checked as cli.ts checks it (the same messages). */
function readRequest(flagKernel: string | undefined): { request: Request; kernel: string } {
  let request: Request;
  try {
    request = JSON.parse(readFileSync(0, "utf8"));
    if (typeof request.out_dir !== "string" || !Array.isArray(request.cases)) throw new Error("missing fields");
    if (request.replay !== undefined && (typeof request.replay !== "object" || request.replay === null || Array.isArray(request.replay))) {
      throw new Error("'replay' must be an object {id: {from_dir, segments}}");
    }
    if (request.assets !== undefined && (typeof request.assets !== "object" || request.assets === null || Array.isArray(request.assets))) {
      throw new Error("'assets' must be an object {model name: directory}");
    }
    if (request.inputs_from !== undefined && (typeof request.inputs_from !== "object" || request.inputs_from === null || Array.isArray(request.inputs_from))) {
      throw new Error("'inputs_from' must be an object {id: the path of a document with the case's inputs}");
    }
    if (!request.cases.every((c) => typeof c === "object" && c !== null && typeof c.id === "string")) {
      throw new Error("every case needs a string 'id'");
    }
  } catch (err) {
    throw new Fail(`the request on stdin must be JSON with 'out_dir' and 'cases': ${(err as Error).message}`);
  }
  for (const [where, value] of [["the request's 'kernel'", request.kernel], ["--kernel", flagKernel]] as const) {
    if (value !== undefined && !KERNELS.includes(value as string)) {
      throw new Fail(`${where} must be one of ${KERNELS.join(", ")}, got ${JSON.stringify(value)}`);
    }
  }
  if (request.kernel !== undefined && flagKernel !== undefined && request.kernel !== flagKernel) {
    throw new Fail(`the request's 'kernel' is ${JSON.stringify(request.kernel)} but --kernel is ${JSON.stringify(flagKernel)}; give one`);
  }
  return { request, kernel: (request.kernel ?? flagKernel ?? "auto") as string };
}

/** out_dir/<relative> for a path the page may write: <id>.json, <id>.full.json,
 *  <id>.states/step_<t>.json, <id>.replay/step_<t>.json, <id>.replay/evaluate_<t>.json, for a case
 *  of the request; else null. */
function outputPath(outDir: string, relative: string, ids: Set<string>): string | null {
  const sub = /^(.+)\.(?:states\/step|replay\/(?:step|evaluate))_(\d+)\.json$/.exec(relative);
  if (sub !== null) return ids.has(sub[1]) ? join(outDir, relative) : null;
  if (relative.includes("/")) return null;
  const full = /^(.+)\.full\.json$/.exec(relative);
  if (full !== null && ids.has(full[1])) return join(outDir, relative);
  const plain = /^(.+)\.json$/.exec(relative);
  return plain !== null && ids.has(plain[1]) ? join(outDir, relative) : null;
}

let tmpCount = 0;
function writeAtomically(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${tmpCount++}`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

async function run(name: BrowserName, flagKernel: string | undefined): Promise<number> {
  const { request, kernel } = readRequest(flagKernel);
  executables(name); // a browser that is not installed fails here, before anything starts
  mkdirSync(request.out_dir, { recursive: true });
  if (request.cases.length === 0) return 0;

  // What the page fetches: the cases, the kernel, each replay's and each asset's directory by name
  // (and, below, the inputs handed to the cases).
  const dirs: Record<string, string> = {};
  const replay: Record<string, unknown> = {};
  Object.entries(request.replay ?? {}).forEach(([id, entry], i) => {
    const e = (typeof entry === "object" && entry !== null ? entry : {}) as Record<string, unknown>;
    if (typeof e.from_dir === "string") dirs[`replay${i}`] = e.from_dir;
    replay[id] = typeof e.from_dir === "string" ? { ...e, url: `replay${i}/` } : e;
  });
  const assets: Record<string, string> = {};
  Object.entries(request.assets ?? {}).forEach(([model, dir], i) => {
    if (typeof dir === "string") { dirs[`asset${i}`] = dir; assets[model] = `asset${i}/`; }
  });
  const ids = new Set(request.cases.map((c) => c.id));
  // The handed documents go in the page's request: each named document, or why it could not be read.
  const inputs: Record<string, { doc?: unknown; error?: string }> = {};
  for (const [id, path] of Object.entries(request.inputs_from ?? {})) {
    if (!ids.has(id)) continue;
    try {
      if (typeof path !== "string") throw new Error(`not a path: ${JSON.stringify(path)}`);
      const doc = JSON.parse(readFileSync(path, "utf8")) as { inputs?: unknown };
      if (doc?.inputs === undefined) throw new Error(`${path} has no 'inputs'`);
      inputs[id] = { doc };
    } catch (err) {
      inputs[id] = { error: (err as Error).message };
    }
  }
  let browser: OpenBrowser | undefined;
  let finish: (outcome: { fatal?: string; request?: boolean }) => void = () => undefined;
  const finished = new Promise<{ fatal?: string; request?: boolean }>((res) => { finish = res; });
  let started = false;

  const served = await serve({
    dirs,
    onCodeError: (message) => finish({ fatal: `the page cannot load the port: ${message}` }),
    json: { request: { cases: request.cases, kernel, replay, assets, inputs } },
    posts: {
      started: () => { started = true; return { status: 204 }; },
      out: (body, relative) => {
        const path = outputPath(request.out_dir, relative, ids);
        if (path === null) return { status: 403, text: `not a file of this request: ${relative}` };
        writeAtomically(path, body);
        return { status: 204 };
      },
      status: (body) => {
        let status: Record<string, unknown>;
        try { status = JSON.parse(body); } catch { return { status: 400, text: "a status line must be JSON" }; }
        if (typeof status.id !== "string" || !ids.has(status.id)) return { status: 400, text: `no case ${JSON.stringify(status.id)} in this request` };
        status.browser = { name, version: browser?.version ?? "unknown" };
        process.stdout.write(JSON.stringify(status) + "\n");
        return { status: 204 };
      },
      done: () => { finish({}); return { status: 204 }; },
      fatal: (body) => {
        let said: { message?: unknown; request?: unknown } = {};
        try { said = JSON.parse(body); } catch { said = { message: body }; }
        finish({ fatal: String(said.message ?? "") || "the page stopped without saying why", request: said.request === true });
        return { status: 204 };
      },
    },
  });
  try {
    browser = await openBrowser(name);
    const b = browser;
    void b.gone.then((why) => finish({ fatal: why || `${name} went away without a word` }));
    const startTimer = setTimeout(() => {
      if (!started) finish({ fatal: `the page did not start the port's worker within ${START_TIMEOUT_MS / 1000} s` });
    }, START_TIMEOUT_MS);
    await b.goto(`${served.base}port/browser/page/host.html`);
    const outcome = await finished;
    clearTimeout(startTimer);
    if (outcome.fatal !== undefined) {
      throw new Fail(outcome.request ? outcome.fatal : `${name} ${b.version} could not run the request: ${outcome.fatal}`);
    }
    return 0;
  } finally {
    await browser?.close().catch(() => undefined);
    await served.close();
    cleanup();
  }
}

/** Stop, browser and all, when the runner is gone however it died (a SIGKILLed runner cannot
 *  stop its engines, which run in sessions of their own): every 0.25 s, the parent pid and the
 *  process VERIFY_RUN_OWNER names ("<pid>-<start time in clock ticks>", /proc/<pid>/stat), as
 *  cli.ts watches them. The cases run in the browser, so this process's event loop is free. */
function exitWithRunner(name: string): void {
  const parent = process.ppid;
  const owner = process.env.VERIFY_RUN_OWNER ?? "";
  const [pid, ticks] = /^\d+-\d+$/.test(owner) ? owner.split("-").map(Number) : [0, 0];
  const ownerAlive = () => {
    if (pid === 0) return true;
    if (!existsSync("/proc/self/stat")) {
      try { process.kill(pid, 0); return true; } catch (err) { return (err as NodeJS.ErrnoException).code !== "ESRCH"; }
    }
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      return fields[0] !== "Z" && (ticks === 0 || fields[19] === String(ticks));
    } catch { return false; }
  };
  setInterval(() => {
    if (process.ppid !== parent || !ownerAlive()) {
      process.stderr.write(`port (${name}): the runner that started this engine is gone; stopping\n`);
      cleanup();
      process.exit(2);
    }
  }, 250).unref();
}

async function main(argv: string[]): Promise<number> {
  let values: { browser?: string; kernel?: string }, positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: { browser: { type: "string" }, kernel: { type: "string" } } }));
  } catch (err) {
    process.stderr.write(`${USAGE}: ${(err as Error).message}\n`);
    return 2;
  }
  if (!BROWSERS.includes(values.browser as BrowserName) || positionals.length !== 1 || !["run", "check"].includes(positionals[0])) {
    process.stderr.write(`${USAGE} (got ${JSON.stringify(argv.join(" "))})\n`);
    return 2;
  }
  const name = values.browser as BrowserName;
  if (positionals[0] === "check") { // what `verify attention --browser` asks before anything runs
    try {
      executables(name);
      return 0;
    } catch (err) {
      process.stderr.write(`${failureLine(name, err)}\n`);
      return 2;
    }
  }
  exitWithRunner(name);
  try {
    return await run(name, values.kernel);
  } catch (err) {
    process.stderr.write(`port (${name}): ${failureLine(name, err)}\n`);
    return 2;
  }
}

exitAfter(main(process.argv.slice(2)));
