// The browser engines' static server (Node; docs/browsers.md). It listens on 127.0.0.1, on an
// ephemeral port, under a random session path, and serves, read-only:
//   <session>/port/src/...          the port's core, port_ts/src
//   <session>/port/browser/page/... the pages, port_ts/browser/page
//   <session>/<name>/<file>         a file directly inside one of the directories it is given
//                                   (a model's assets, a replay's from_dir, the lab's exports)
//   <session>/<name>.json           a JSON value it is given (the page's request)
// and nothing else: no listing, no other directory, no path with "..", no file outside its root.
// A .ts file is served as JavaScript with its types stripped by Node's own
// module.stripTypeScriptTypes, the transform Node applies when it runs cli.ts: the browser runs
// the same JavaScript text as Node, at the same line and column, with no build step and nothing
// written to disk. POST <session>/<name> hands the body to the handler of that name (the engine's
// documents and status lines); every other request is refused.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { dirname, join, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

export const PORT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), ".."); // port_ts
const TREES: Record<string, string> = { "port/src": join(PORT_ROOT, "src"), "port/browser/page": join(PORT_ROOT, "browser", "page") };
const TYPES: Record<string, string> = {
  ".ts": "text/javascript; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".html": "text/html; charset=utf-8",
  ".css": "text/css; charset=utf-8", ".json": "application/json; charset=utf-8", ".png": "image/png",
};
const MAX_BODY = 512 * 1024 * 1024; // the largest document a case writes is a few MB

// stripTypeScriptTypes is still marked experimental in Node 24 and warns once on stderr; the
// engine's stderr is for its own messages, so that one warning is dropped (and only that one).
const emitWarning = process.emitWarning;
process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  if (String(typeof warning === "string" ? warning : warning.message).includes("stripTypeScriptTypes")) return;
  (emitWarning as (...a: unknown[]) => void).call(process, warning, ...rest);
}) as typeof process.emitWarning;

export type PostHandler = (body: string, rest: string) => { status: number; text?: string };

export interface ServeOptions {
  dirs?: Record<string, string>; // name -> directory: <session>/<name>/<file> for its files
  json?: Record<string, unknown>; // name -> value: <session>/<name>.json
  posts?: Record<string, PostHandler>; // name -> handler: POST <session>/<name>[/<rest>]
  /** A file of the port's own trees that cannot be served (missing, or its types not strippable):
   *  the page cannot run, and not every browser says so (Firefox's module worker fails silently). */
  onCodeError?: (message: string) => void;
}

export interface Served {
  server: Server;
  base: string; // http://127.0.0.1:<port>/<session>/
  close(): Promise<void>;
}

const stripped = new Map<string, { mtime: number; text: string }>();

/** One path segment as sent, decoded; null for anything that could leave a directory. */
function segment(raw: string): string | null {
  let s: string;
  try { s = decodeURIComponent(raw); } catch { return null; }
  return s === "" || s === "." || s === ".." || /[\/\\\0]/.test(s) ? null : s;
}

function extension(path: string): string {
  const dot = path.lastIndexOf(".");
  return dot > path.lastIndexOf("/") ? path.slice(dot) : "";
}

/** Serve root/parts...; a refusal also goes to onError when given (the port's own trees). */
function sendFile(res: ServerResponse, root: string, parts: string[], onError?: (message: string) => void): void {
  const path = resolve(root, ...parts);
  const fail = (status: number, text: string) => {
    onError?.(text);
    refuse(res, status, text);
  };
  if (!path.startsWith(root + sep)) return fail(404, `not served: ${path}`);
  let mtime: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) return fail(404, `not a file: ${path}`);
    mtime = st.mtimeMs;
  } catch (err) {
    return fail(404, (err as Error).message); // as readFileSync says it: ENOENT ... '<path>'
  }
  const ext = extension(path);
  let body: Buffer | string;
  if (ext === ".ts") {
    let hit = stripped.get(path);
    if (hit === undefined || hit.mtime !== mtime) {
      try {
        hit = { mtime, text: stripTypeScriptTypes(readFileSync(path, "utf8")) };
      } catch (err) {
        return fail(500, `cannot strip the types of ${path}: ${(err as Error).message.split("\n")[0]}`);
      }
      stripped.set(path, hit);
    }
    body = hit.text;
  } else {
    body = readFileSync(path);
  }
  res.writeHead(200, { "content-type": TYPES[ext] ?? "application/octet-stream", "cache-control": "no-store" });
  res.end(body);
}

function refuse(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "cache-control": "no-store" });
  res.end(text);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((ok, fail) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) { fail(new Error(`a body over ${MAX_BODY} bytes`)); req.destroy(); } else chunks.push(c);
    });
    req.on("end", () => ok(Buffer.concat(chunks).toString("utf8")));
    req.on("error", fail);
  });
}

/** Start the server; resolves once it listens. */
export function serve(options: ServeOptions = {}): Promise<Served> {
  const session = randomBytes(12).toString("hex");
  const dirs = Object.fromEntries(Object.entries(options.dirs ?? {}).map(([k, d]) => [k, resolve(d)]));
  const json = options.json ?? {}, posts = options.posts ?? {};
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const raw = url.pathname.split("/").slice(1);
    if (raw[0] !== session) return refuse(res, 404, "not served");
    const parts = raw.slice(1).map(segment);
    if (parts.some((p) => p === null) || parts.length === 0) return refuse(res, 404, "not served");
    const path = parts as string[];
    if (req.method === "GET") {
      for (const [prefix, root] of Object.entries(TREES)) {
        const p = prefix.split("/");
        if (path.length > p.length && p.every((s, i) => path[i] === s)) return sendFile(res, root, path.slice(p.length), options.onCodeError);
      }
      if (path.length === 2 && Object.hasOwn(dirs, path[0])) return sendFile(res, dirs[path[0]], [path[1]]);
      if (path.length === 1 && path[0].endsWith(".json") && Object.hasOwn(json, path[0].slice(0, -5))) {
        res.writeHead(200, { "content-type": TYPES[".json"], "cache-control": "no-store" });
        return void res.end(JSON.stringify(json[path[0].slice(0, -5)]));
      }
      return refuse(res, 404, "not served");
    }
    if (req.method === "POST" && Object.hasOwn(posts, path[0])) {
      readBody(req).then((body) => {
        const answer = posts[path[0]](body, path.slice(1).join("/"));
        if (answer.status === 204) { res.writeHead(204); res.end(); } else refuse(res, answer.status, answer.text ?? "");
      }, (err: Error) => refuse(res, 413, err.message));
      return;
    }
    return refuse(res, 405, "not allowed");
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((ok, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      ok({
        server, base: `http://127.0.0.1:${port}/${session}/`,
        close: () => new Promise((done) => { server.closeAllConnections(); server.close(() => done()); }),
      });
    });
  });
}
