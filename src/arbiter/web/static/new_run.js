// The new test form: presets fill in their fields, editing such a field by
// hand switches its preset to "custom", only the chosen stop rule's fields
// are shown, and an SPSA run's base follows its test branch. Without this script every field is shown and the server
// applies the chosen presets itself, so the form works the same.
"use strict";

(function () {
  const form = document.querySelector("form.new-run");
  if (!form) return;

  function field(name) {
    return form.elements.namedItem(name);
  }

  function setHash(options, mib) {
    const kept = options.split(/\s+/).filter((t) => t && !/^hash=/i.test(t));
    return ["Hash=" + mib, ...kept].join(" ");
  }

  // preset select -> {field name: function(option) -> value}
  const presets = {
    time_preset: {
      tc: (o) => o.dataset.tc,
      threads: (o) => o.dataset.threads,
      new_options: (o) => setHash(field("new_options").value, o.dataset.hash),
      base_options: (o) => setHash(field("base_options").value, o.dataset.hash),
    },
    bounds: {
      elo0: (o) => o.dataset.elo0,
      elo1: (o) => o.dataset.elo1,
    },
  };

  for (const [selectName, fills] of Object.entries(presets)) {
    const select = field(selectName);
    if (!select) continue;
    const apply = () => {
      const option = select.selectedOptions[0];
      if (!option || option.value === "custom") return;
      for (const [name, value] of Object.entries(fills)) field(name).value = value(option);
    };
    select.addEventListener("change", apply);
    for (const name of Object.keys(fills)) {
      field(name).addEventListener("input", () => {
        select.value = "custom";
      });
    }
  }

  const sections = form.querySelectorAll("[data-stop-rule]");
  function showStopRule() {
    const chosen = form.querySelector("input[name=stop_rule]:checked");
    const rule = chosen ? chosen.value : "sprt";
    for (const section of sections) {
      section.hidden = !section.dataset.stopRule.split(" ").includes(rule);
    }
  }
  for (const radio of form.querySelectorAll("input[name=stop_rule]")) {
    radio.addEventListener("change", showStopRule);
  }
  showStopRule();

  // An SPSA run tunes its branch against itself: its base follows the test
  // branch and bench (the server does the same), unless it repeats a run.
  const locked = [["base_tag", "new_tag"], ["base_signature", "new_signature"]];
  const typed = Object.fromEntries(locked.map(([base]) => [base, field(base).value]));
  const repeats = field("rescheduled_from") !== null;
  function lockBase() {
    const chosen = form.querySelector("input[name=stop_rule]:checked");
    const spsa = chosen !== null && chosen.value === "spsa" && !repeats;
    for (const [base, test] of locked) {
      const input = field(base);
      if (spsa && !input.readOnly) typed[base] = input.value;
      input.readOnly = spsa;
      input.value = spsa ? field(test).value : typed[base];
    }
  }
  for (const radio of form.querySelectorAll("input[name=stop_rule]")) {
    radio.addEventListener("change", lockBase);
  }
  for (const [base, test] of locked) {
    field(test).addEventListener("input", () => {
      if (field(base).readOnly) field(base).value = field(test).value;
    });
  }
  lockBase();

  const odds = field("time_odds");
  const newTc = field("new_tc");
  function showTimeOdds() {
    newTc.closest(".field").hidden = !odds.checked;
  }
  odds.addEventListener("change", showTimeOdds);
  showTimeOdds();
})();
