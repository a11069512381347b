// The port's engine inside a browser: a module worker started by host.ts, running one request as
// port_ts/src/cli.ts runs it under Node (docs/protocol.md, docs/browsers.md), case by case, with
// the same core functions and the same documents (golden text through the core's dumps, byte for
// byte). Only the input and output differ: where cli.ts reads and writes files, this worker asks
// the engine's own server (port_ts/browser/server.ts, on 127.0.0.1) with synchronous requests,
// allowed in a worker: the request and its files by GET, each output file and each status line by
// POST, in the order cli.ts writes them, so every file is written before its case's status line.
//
// Keep in step with cli.ts's run(): the same request fields, the same documents, the same status
// lines (plus what the engine adds: the browser's name and version).

import {
  type Assets, type CaseSpec, type Json, type StateDocument,
  CaseError, caseDocument, caseStatus, dumps, writeCase, evaluateState, productEngine, replaySegment, runCaseWithStates,
} from "./core.ts";

/** The request as the engine hands it to the page: the stdin request's cases, the kernel, the
 *  replay entries each with the URL of its from_dir, each asset's URL, and the inputs handed to
 *  cases (each named document, read by the engine, or why it could not be read). */
interface PageRequest {
  cases: CaseSpec[];
  kernel: "auto" | "js" | "wasm";
  replay: Record<string, { from_dir?: unknown; segments?: unknown; evaluate?: unknown; free_run?: unknown; url?: string }>;
  assets: Record<string, string>;
  inputs: Record<string, { doc?: unknown; error?: string }>;
}

let base = ""; // the session's root URL on the engine's server, from host.ts

function request(method: "GET" | "POST", path: string, body?: string, binary = false): XMLHttpRequest {
  const xhr = new XMLHttpRequest();
  xhr.open(method, base + path, false); // synchronous: allowed in a worker, as readFileSync in cli.ts
  if (binary) xhr.responseType = "arraybuffer";
  xhr.send(body ?? null);
  return xhr;
}

/** GET a served file; throws the server's message (a missing file says which path) on failure. */
function read(path: string, binary: boolean): XMLHttpRequest {
  const xhr = request("GET", path, undefined, binary);
  if (xhr.status !== 200) {
    throw new Error(binary ? `HTTP ${xhr.status}` : xhr.responseText || `HTTP ${xhr.status}`);
  }
  return xhr;
}

/** POST to the engine; any refusal ends the run (the engine says why on its stderr). */
function post(path: string, body: string): void {
  const xhr = request("POST", path, body);
  if (xhr.status !== 204) throw new Error(`the engine refused POST ${path}: HTTP ${xhr.status} ${xhr.responseText}`);
}

function write(relative: string, text: string): void {
  post(`out/${relative.split("/").map(encodeURIComponent).join("/")}`, text);
}

/** The request's assets as the core takes them: bytes of a file, read on demand (cli.ts modelFiles). */
function modelFiles(urls: Record<string, string>): Assets {
  const assets: Assets = {};
  for (const [name, url] of Object.entries(urls)) {
    assets[name] = {
      file: (file: string) => {
        const xhr = request("GET", `${url}${encodeURIComponent(file)}`, undefined, true);
        if (xhr.status !== 200) throw new Error(`cannot read ${file} of model '${name}' (HTTP ${xhr.status})`);
        return new Uint8Array(xhr.response as ArrayBuffer);
      },
    };
  }
  return assets;
}

/** cli.ts readState(): the state document of step t in the entry's from_dir, checked to hold step t. */
function readState(entry: PageRequest["replay"][string], t: number, what: string): StateDocument {
  const source = `${(entry.from_dir as string).replace(/\/+$/, "")}/step_${t}.json`;
  let stateDoc: StateDocument;
  try {
    stateDoc = JSON.parse(read(`${entry.url}step_${t}.json`, false).responseText);
  } catch (err) {
    throw new CaseError(`${what}: cannot read the state of step ${t} from ${source}: ${(err as Error).message}`);
  }
  const opt = ((stateDoc.outputs as { [k: string]: { data: Json[] } } | undefined)?.opt?.data ?? [null])[0];
  if (opt !== t) throw new CaseError(`${what}: ${source} holds the state of step ${opt}, not ${t}`);
  return stateDoc;
}

/** cli.ts replay(): each segment's state of step t0 read from from_dir, steps t0+1..t1 run here;
 *  then each step of `evaluate` evaluated at the state of that step. Returns [segments, evaluations]. */
function replay(spec: CaseSpec, entry: PageRequest["replay"][string]): [number, number] {
  const segments = entry.segments, evaluate = entry.evaluate ?? [];
  if (typeof entry.from_dir !== "string" || entry.url === undefined || !Array.isArray(segments)
      || !segments.every((s) => Array.isArray(s) && s.length === 2 && s.every(Number.isInteger))
      || !Array.isArray(evaluate) || !evaluate.every(Number.isInteger)) {
    const { url: _url, ...given } = entry;
    throw new CaseError(`replay of '${spec.id}' needs 'from_dir', 'segments' [[t0, t1], ...] and optionally 'evaluate' [t, ...], got ${JSON.stringify(given)}`);
  }
  for (const [t0, t1] of segments as [number, number][]) {
    const stateDoc = readState(entry, t0, `replay [${t0}, ${t1}]`);
    write(`${spec.id}.replay/step_${t1}.json`, dumps(replaySegment(spec, stateDoc, t1)) + "\n");
  }
  for (const t of evaluate as number[]) {
    const stateDoc = readState(entry, t, `evaluate ${t}`);
    write(`${spec.id}.replay/evaluate_${t}.json`, dumps(caseDocument(spec as unknown as Json, {}, evaluateState(spec, stateDoc))) + "\n");
  }
  return [segments.length, (evaluate as number[]).length];
}

function run(req: PageRequest): void {
  if (req.kernel === "wasm" && !productEngine.simd) {
    post("fatal", JSON.stringify({
      request: true,
      message: "kernel 'wasm' asked for, but this browser's JavaScript engine has no WebAssembly SIMD; ask for 'auto' or 'js'",
    }));
    return;
  }
  productEngine.mode = req.kernel;
  const assets = modelFiles(req.assets);
  for (const spec of req.cases) {
    const status = caseStatus(spec.id, () => performance.now(), (status) => {
      const entry = Object.hasOwn(req.replay, spec.id) ? req.replay[spec.id] : undefined;
      if (entry === undefined || entry.free_run !== false) {
        const given = Object.hasOwn(req.inputs, spec.id) ? req.inputs[spec.id] : undefined;
        if (given?.error !== undefined) throw new CaseError(`cannot read the inputs handed to '${spec.id}': ${given.error}`);
        const { doc, states } = runCaseWithStates(spec, assets, given?.doc);
        writeCase(spec, doc, states, write);
      }
      if (entry !== undefined) [status.replayed, status.evaluated] = replay(spec, entry);
    });
    post("status", JSON.stringify(status));
  }
  post("done", "");
}

function fatal(message: string): void {
  try { post("fatal", JSON.stringify({ request: false, message })); } catch { /* the engine's start-up timer reports it */ }
}

self.addEventListener("message", (event: MessageEvent<{ base: string }>) => {
  base = event.data.base;
  try {
    post("started", JSON.stringify({ simd: productEngine.simd, userAgent: navigator.userAgent }));
    run(JSON.parse(read("request.json", false).responseText) as PageRequest);
  } catch (err) {
    const e = err as Error;
    fatal(`the port's worker stopped: ${e.name}: ${e.message}`);
  }
}, { once: true });
