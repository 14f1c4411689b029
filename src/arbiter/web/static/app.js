// Arbiter's one page script (no library). Pages work without it.
//  - Live regions: <div data-live-src="URL" data-live-period="S"> are refreshed
//    from URL every S seconds while the tab is visible, without reloading the
//    page. The server answers the region's new content (200), 204 when nothing
//    changed since the version we hold (X-Live-Version), or 286 with the final
//    content once there is nothing left to wait for.
//  - Forms with data-confirm ask before they submit.
//  - Chart series toggles; notifications of followed runs that finished.
//  - Copy buttons: <button data-copy="ID"> copies the text of element ID.
//  - The signup form's proof of work: [data-pow-challenge] fills its altcha input.
"use strict";

(function () {
  const FINAL = 286;

  function liveRegion(region) {
    const period = 1000 * Number(region.dataset.livePeriod || 20);
    let timer = null;
    let busy = false;
    let done = region.hasAttribute("data-live-done");

    function url() {
      const target = new URL(region.dataset.liveSrc, window.location.href);
      if (region.dataset.liveVersion) target.searchParams.set("version", region.dataset.liveVersion);
      return target;
    }

    async function refresh() {
      if (done || busy || document.visibilityState !== "visible") return;
      busy = true;
      try {
        const reply = await fetch(url(), { credentials: "same-origin", headers: { "X-Live": "1" } });
        if (reply.status === 200 || reply.status === FINAL) {
          // Sections the reader folded or unfolded stay so across the update.
          const folded = new Map(
            Array.from(region.querySelectorAll("details[id]"), (d) => [d.id, d.open]));
          region.innerHTML = await reply.text();
          for (const [id, open] of folded) {
            const section = document.getElementById(id);
            if (section) section.open = open;
          }
          const version = reply.headers.get("X-Live-Version");
          if (version) region.dataset.liveVersion = version;
          region.dispatchEvent(new CustomEvent("live:updated", { bubbles: true }));
        }
        if (reply.status === FINAL) stop(true);
      } catch (error) {
        // Offline or the server restarting: try again at the next tick.
      } finally {
        busy = false;
      }
    }

    function start() {
      if (done || timer !== null) return;
      timer = window.setInterval(refresh, period);
    }

    function stop(final) {
      if (final) done = true;
      if (timer !== null) window.clearInterval(timer);
      timer = null;
    }

    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") {
        refresh();
        start();
      } else {
        stop(false);
      }
    });
    if (document.visibilityState === "visible") start();
  }

  // Delegated, so forms that arrive with a live update ask too.
  function confirmForms() {
    document.addEventListener("submit", (event) => {
      const form = event.target.closest("form[data-confirm]");
      if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }

  // Home page type filters: a row shows when each of its tags is ticked.
  // The choice is kept in localStorage and applied again after live updates.
  function runFilters() {
    const bar = document.querySelector("[data-run-filters]");
    if (!bar) return;
    const boxes = Array.from(bar.querySelectorAll("input[type=checkbox]"));
    let saved = {};
    try {
      saved = JSON.parse(window.localStorage.getItem("arbiter.runFilters") || "{}");
    } catch (error) {
      saved = {};
    }
    for (const box of boxes) if (box.value in saved) box.checked = saved[box.value];
    function apply() {
      const hidden = new Set(boxes.filter((b) => !b.checked).map((b) => b.value));
      for (const row of document.querySelectorAll("tr[data-tags]")) {
        row.hidden = row.dataset.tags.split(" ").some((tag) => hidden.has(tag));
      }
      const state = Object.fromEntries(boxes.map((b) => [b.value, b.checked]));
      window.localStorage.setItem("arbiter.runFilters", JSON.stringify(state));
    }
    for (const box of boxes) box.addEventListener("change", apply);
    document.addEventListener("live:updated", apply);
    bar.hidden = false;
    apply();
  }

  // Chart series toggles: unticking a box hides that series of its chart. The
  // choice outlives live updates (kept per chart id on this page).
  function seriesToggles() {
    const hiddenByChart = new Map();
    function apply() {
      for (const box of document.querySelectorAll("[data-series-for]")) {
        const chartId = box.dataset.seriesFor;
        const hidden = hiddenByChart.get(chartId) || new Set();
        box.hidden = false;
        for (const input of box.querySelectorAll("input[type=checkbox]")) {
          input.checked = !hidden.has(input.value);
        }
        const chart = document.getElementById(chartId);
        if (!chart) continue;
        for (const group of chart.querySelectorAll("[data-series]")) {
          group.style.display = hidden.has(group.dataset.series) ? "none" : "";
        }
      }
    }
    document.addEventListener("change", (event) => {
      const input = event.target;
      const box = input.closest && input.closest("[data-series-for]");
      if (!box) return;
      const chartId = box.dataset.seriesFor;
      const hidden = hiddenByChart.get(chartId) || new Set();
      if (input.checked) hidden.delete(input.value); else hidden.add(input.value);
      hiddenByChart.set(chartId, hidden);
      apply();
    });
    document.addEventListener("live:updated", apply);
    apply();
  }

  // Followed runs that finished, and for approvers quarantined machines: a
  // browser notification (the Notification API, once the visitor allowed it).
  // The server says what happened after the time kept in localStorage, so one
  // tab's notice is not repeated by another.
  function notifications() {
    const source = document.body.dataset.notifySrc;
    if (!source) return;
    const KEY = "arbiter.notifiedSince";
    const supported = "Notification" in window;
    let busy = false;

    function show(run) {
      document.dispatchEvent(new CustomEvent("arbiter:notified", { detail: run }));
      if (!supported || Notification.permission !== "granted") return;
      const note = new Notification(`Test ${run.verdict}: ${run.title}`, {
        body: "A test you follow has finished.",
        tag: run.id,
      });
      note.onclick = () => {
        window.focus();
        window.location.href = run.url;
      };
    }

    // Approvers also hear of each machine the health check quarantines.
    function showMachine(machine) {
      document.dispatchEvent(new CustomEvent("arbiter:quarantined", { detail: machine }));
      if (!supported || Notification.permission !== "granted") return;
      const note = new Notification(`Machine quarantined: ${machine.name}`, {
        body: machine.reason,
        tag: `quarantine-${machine.name}`,
      });
      note.onclick = () => {
        window.focus();
        window.location.href = machine.url;
      };
    }

    async function check() {
      if (busy) return;
      busy = true;
      try {
        const since = window.localStorage.getItem(KEY);
        const target = new URL(source, window.location.href);
        if (since) target.searchParams.set("since", since);
        const reply = await fetch(target, { credentials: "same-origin" });
        if (!reply.ok) return;
        const found = await reply.json();
        window.localStorage.setItem(KEY, String(found.now));
        if (since) for (const run of found.runs) show(run);
        if (since) for (const machine of found.machines || []) showMachine(machine);
      } catch (error) {
        // Offline: the next check asks for the same span again.
      } finally {
        busy = false;
      }
    }

    for (const button of document.querySelectorAll("[data-enable-notifications]")) {
      if (!supported || Notification.permission !== "default") continue;
      button.hidden = false;
      button.addEventListener("click", async () => {
        await Notification.requestPermission();
        button.hidden = Notification.permission !== "default";
      });
    }
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") check();
    });
    window.setInterval(check, 60000);
    check();
  }

  // Copy buttons, hidden until this script shows them. The clipboard API needs a
  // secure context; elsewhere the text is selected and copied the old way.
  function copyButtons() {
    for (const button of document.querySelectorAll("button[data-copy]")) button.hidden = false;
    document.addEventListener("click", async (event) => {
      const button = event.target.closest && event.target.closest("button[data-copy]");
      if (!button) return;
      const source = document.getElementById(button.dataset.copy);
      if (!source) return;
      let copied = false;
      try {
        await navigator.clipboard.writeText(source.textContent);
        copied = true;
      } catch (error) {
        const range = document.createRange();
        range.selectNodeContents(source);
        window.getSelection().removeAllRanges();
        window.getSelection().addRange(range);
        copied = document.execCommand("copy");
      }
      button.textContent = copied ? "Copied" : "Select and copy";
    });
  }

  // The signup form's proof of work: ALTCHA's challenge (version 2, SHA-256 of
  // salt ‖ nonce ‖ counter as 4 big-endian bytes, one round) solved here, in
  // slices that leave the page responsive. SHA-256 is computed by this script:
  // crypto.subtle exists only on https pages, and its promise per hash would be
  // slower than the hash. The message fits one 64-byte block.
  function sha256Tables() {
    const primes = [];
    for (let n = 2; primes.length < 64; n++) if (primes.every((p) => n % p)) primes.push(n);
    const frac = (x) => (x - Math.floor(x)) * 2 ** 32 >>> 0;
    return {
      k: Uint32Array.from(primes, (p) => frac(Math.cbrt(p))),
      start: Uint32Array.from(primes.slice(0, 8), (p) => frac(Math.sqrt(p))),
    };
  }

  function sha256Block(tables, words, out, w) {
    w.set(words);  // w: 64 words of scratch, reused
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15], b = w[i - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let [a, b, c, d, e, f, g, h] = tables.start;
    for (let i = 0; i < 64; i++) {
      const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
      const t1 = (h + s1 + ((e & f) ^ (~e & g)) + tables.k[i] + w[i]) | 0;
      const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
      const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    const sums = [a, b, c, d, e, f, g, h];
    for (let i = 0; i < 8; i++) out[i] = (tables.start[i] + sums[i]) >>> 0;
  }

  function hexBytes(hex) {
    return Uint8Array.from(hex.match(/../g) || [], (pair) => parseInt(pair, 16));
  }

  function proofOfWork(field) {
    const challenge = JSON.parse(field.dataset.powChallenge);
    const p = challenge.parameters;
    const input = field.querySelector("input[name=altcha]");
    const status = field.querySelector("#proof-status");
    const head = [...hexBytes(p.salt), ...hexBytes(p.nonce)];
    const length = head.length + 4;
    const prefix = p.keyPrefix.toLowerCase();
    if (p.algorithm !== "SHA-256" || p.cost !== 1 || length > 55 || prefix.length < 8) {
      status.textContent = "This page asks for a proof of work it cannot make.";
      return;
    }
    const tables = sha256Tables();
    const block = new Uint8Array(64);
    block.set(head);
    block[length] = 0x80;
    new DataView(block.buffer).setUint32(60, length * 8);
    const view = new DataView(block.buffer);
    const words = new Uint32Array(16);
    const out = new Uint32Array(8);
    const scratch = new Uint32Array(64);
    const wanted = parseInt(prefix.slice(0, 8), 16) >>> 0;
    const form = field.closest("form");
    let counter = 0;
    let solved = false;
    let submitting = false;
    form.addEventListener("submit", (event) => {
      if (solved) return;
      event.preventDefault();  // sent as soon as the proof is ready
      submitting = true;
      status.textContent = "Finishing the proof of work, then sending…";
    });
    function slice() {
      const stop = counter + 20000;
      for (; counter < stop && counter <= 0xffffffff; counter++) {
        view.setUint32(head.length, counter);
        for (let i = 0; i < 16; i++) words[i] = view.getUint32(4 * i);
        sha256Block(tables, words, out, scratch);
        if (out[0] !== wanted) continue;
        const key = Array.from(out, (x) => x.toString(16).padStart(8, "0")).join("");
        if (!key.startsWith(prefix)) continue;
        const payload = { challenge, solution: { counter, derivedKey: key } };
        input.value = btoa(JSON.stringify(payload));
        solved = true;
        status.textContent = "Proof of work done.";
        if (submitting) form.requestSubmit();
        return;
      }
      setTimeout(slice, 0);
    }
    setTimeout(slice, 0);
  }

  for (const region of document.querySelectorAll("[data-live-src]")) liveRegion(region);
  for (const field of document.querySelectorAll("[data-pow-challenge]")) proofOfWork(field);
  copyButtons();
  seriesToggles();
  notifications();
  confirmForms();
  runFilters();
})();
