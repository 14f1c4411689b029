// Arbiter's one page script (no library). Pages work without it.
//  - Live regions: <div data-live-src="URL" data-live-period="S"> are refreshed
//    from URL every S seconds while the tab is visible, without reloading the
//    page. The server answers the region's new content (200), 204 when nothing
//    changed since the version we hold (X-Live-Version), or 286 with the final
//    content once there is nothing left to wait for.
//  - Forms with data-confirm ask before they submit.
//  - Chart series toggles; notifications of followed runs that finished.
//  - Copy buttons: <button data-copy="ID"> copies the text of element ID.
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

  // Followed runs that finished: a browser notification (the Notification API,
  // once the visitor allowed it). The server says which finished after the
  // time kept in localStorage, so one tab's notice is not repeated by another.
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

  for (const region of document.querySelectorAll("[data-live-src]")) liveRegion(region);
  copyButtons();
  seriesToggles();
  notifications();
  confirmForms();
  runFilters();
})();
