// The page of a browser engine run (docs/browsers.md): it starts the port's engine in a module
// worker (worker.ts), so a long case (the 600-step reversal run) never blocks the page, and
// reports a worker that cannot even load (a missing module, a syntax the browser rejects) to the
// engine's server, which then fails the run with that message instead of waiting for nothing.
// The page is at <session>/port/browser/page/host.html: the session's root is three levels up.

const base = new URL("../../../", location.href).href;
const state = document.getElementById("state")!;

function fatal(message: string): void {
  state.textContent = message;
  void fetch(`${base}fatal`, { method: "POST", body: JSON.stringify({ request: false, message }) });
}

const worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
worker.addEventListener("error", (event) => {
  event.preventDefault();
  fatal(`the port's worker failed in this browser: ${event.message || "it did not load (a module missing, or a syntax this browser rejects)"}` +
    (event.filename ? ` at ${event.filename}:${event.lineno}:${event.colno}` : ""));
});
worker.postMessage({ base });
state.textContent = "The port's engine is running in a worker; its documents go to the engine's out_dir.";
