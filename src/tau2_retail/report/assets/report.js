/* tau2 retail run report: renders the embedded JSON with plain DOM calls.
 *
 * Every text that came from the run (model replies, tool results, judge reasons, even ids) is
 * inserted as a text node (textContent / append(string)); nothing is ever parsed as markup.
 * Scenario details sit in their own JSON blocks and are parsed when a scenario is opened; the
 * scenario table renders only the rows in view.
 */
"use strict";
(function () {
  const started = performance.now();
  const SVG_NS = "http://www.w3.org/2000/svg";
  const ROW_H = 30;

  const DATA = JSON.parse(document.getElementById("tau2-data").textContent);
  const S = DATA.summary;
  let STRINGS = null;
  const DETAILS = new Map();

  // -- helpers ----------------------------------------------------------------------------------

  function $(selector) {
    return document.querySelector(selector);
  }

  function add(el, kids) {
    for (const kid of kids) {
      if (kid == null || kid === false) continue;
      if (Array.isArray(kid)) add(el, kid);
      else el.append(kid instanceof Node ? kid : String(kid));
    }
    return el;
  }

  function setAttrs(el, attrs) {
    if (!attrs) return;
    for (const [key, value] of Object.entries(attrs)) {
      if (value == null || value === false) continue;
      if (key === "class") el.setAttribute("class", value);
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
  }

  /** Replace ``el``'s children (null and false are skipped, strings become text nodes). */
  function fill(el, ...kids) {
    el.replaceChildren();
    return add(el, kids);
  }

  /** An HTML element; string children become text nodes. */
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    return add(el, kids);
  }

  /** An SVG element; string children become text nodes. */
  function s(tag, attrs, ...kids) {
    const el = document.createElementNS(SVG_NS, tag);
    setAttrs(el, attrs);
    return add(el, kids);
  }

  function text(value) {
    if (typeof value === "number") {
      if (STRINGS === null) {
        STRINGS = JSON.parse(document.getElementById("tau2-strings").textContent);
      }
      return STRINGS[value];
    }
    return value == null ? "" : String(value);
  }

  function detail(index) {
    if (!DETAILS.has(index)) {
      const block = document.getElementById("tau2-d" + index);
      DETAILS.set(index, block ? JSON.parse(block.textContent) : null);
    }
    return DETAILS.get(index);
  }

  function pct(rate) {
    return rate == null ? "n/a" : (100 * rate).toFixed(2) + "%";
  }

  /** A 95% interval [low, high] (fractions) as "[53.1, 70.6]" (percent), "" when absent. */
  function ciText(ci) {
    return ci ? "[" + (100 * ci[0]).toFixed(1) + ", " + (100 * ci[1]).toFixed(1) + "]" : "";
  }

  function int(n) {
    return n == null ? "-" : Number(n).toLocaleString("en-US");
  }

  function usd(value) {
    if (value == null) return "n/a";
    return "$" + (value < 100 ? value.toFixed(4) : value.toFixed(2));
  }

  function seconds(value) {
    if (value == null) return "-";
    if (value < 10) return value.toFixed(2) + "s";
    if (value < 600) return value.toFixed(1) + "s";
    return Math.floor(value / 60) + "m" + String(Math.round(value % 60)).padStart(2, "0") + "s";
  }

  function pretty(raw) {
    const value = text(raw);
    const trimmed = value.trim();
    if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
      try {
        return JSON.stringify(JSON.parse(trimmed), null, 2);
      } catch (error) {
        return value;
      }
    }
    return value;
  }

  function clip(value, limit) {
    return value.length > limit ? value.slice(0, limit - 1) + "\u2026" : value;
  }

  function flag(value, title) {
    if (value == null) return h("span", { class: "na", title: title + ": not applicable" }, "\u2013");
    return value
      ? h("span", { class: "ok", title: title + ": passed" }, "\u2713")
      : h("span", { class: "no", title: title + ": failed" }, "\u2717");
  }

  function statusBadge(status) {
    return h("span", { class: "badge st-" + status }, status == null ? "?" : status);
  }

  function scenarioHref(id) {
    return "#s/" + encodeURIComponent(id);
  }

  // -- rows -------------------------------------------------------------------------------------

  const ROWS = DATA.rows.map(function (values, index) {
    const row = { idx: index };
    DATA.columns.forEach(function (column, position) {
      row[column] = values[position];
    });
    row.search = [row.id, row.task, row.split, row.persona, row.stop, row.status]
      .join(" ")
      .toLowerCase();
    return row;
  });
  const BY_ID = new Map(ROWS.map((row) => [String(row.id), row.idx]));
  const CMP = DATA.comparison;
  const FLIPS = new Map(CMP ? CMP.flips.map((flip) => [flip.id, flip]) : []);
  // tasks whose trials disagree (trials > 1); summaries written before they were listed have none
  const FLAKY = new Set((DATA.summary.flaky_tasks || []).map((t) => String(t.task_id)));

  // -- charts -----------------------------------------------------------------------------------

  /** Horizontal bars: items {label, value in 0..1, text, cls, key}. */
  function barChart(items, opts) {
    // wide enough for the longest label and value text at the chart's 12px font: the chart
    // scales to its panel, so nothing is clipped ("100.00% (114/114 scenarios)" was)
    const charW = 6.8;
    const longest = (key) => items.reduce((n, item) => Math.max(n, String(item[key] == null ? "" : item[key]).length), 0);
    const labelW = Math.max((opts && opts.labelW) || 132, Math.ceil(longest("label") * charW) + 12);
    const textW = Math.max((opts && opts.textW) || 170, Math.ceil(longest("text") * charW) + 12);
    const barW = Math.max(120, 460 - labelW - textW - 16);
    const width = labelW + barW + textW + 16;
    const rowH = 26;
    const height = items.length * rowH + 4;
    const svg = s("svg", {
      class: "chart",
      viewBox: "0 0 " + width + " " + height,
      role: "img",
      "aria-label": (opts && opts.title) || "bar chart",
    });
    items.forEach(function (item, i) {
      const y = i * rowH + 2;
      svg.append(s("text", { x: 0, y: y + 16 }, item.label));
      svg.append(s("rect", { class: "track", x: labelW, y: y + 4, width: barW, height: 16, rx: 3 }));
      if (item.value != null) {
        const w = Math.max(0, Math.min(1, item.value)) * barW;
        svg.append(
          s("rect", { class: "bar " + (item.cls || ""), x: labelW, y: y + 4, width: w, height: 16, rx: 3 })
        );
      }
      if (item.ci) {
        // the 95% interval as an error bar across the bar, with caps
        const x1 = labelW + Math.max(0, Math.min(1, item.ci[0])) * barW;
        const x2 = labelW + Math.max(0, Math.min(1, item.ci[1])) * barW;
        const bar = s("g", { class: "ci", "data-ci": item.key }, s("title", null, "95% interval " + ciText(item.ci)));
        bar.append(s("line", { x1: x1, x2: x2, y1: y + 12, y2: y + 12 }));
        bar.append(s("line", { x1: x1, x2: x1, y1: y + 7, y2: y + 17 }));
        bar.append(s("line", { x1: x2, x2: x2, y1: y + 7, y2: y + 17 }));
        svg.append(bar);
      }
      svg.append(
        s(
          "text",
          { x: labelW + barW + 10, y: y + 16, class: item.value == null ? "muted" : null, "data-metric": item.key },
          item.text
        )
      );
    });
    return svg;
  }

  /** The pass^k curve: points {k, value}. */
  function lineChart(points) {
    const width = 460;
    const height = 200;
    const left = 44;
    const right = 20;
    const top = 14;
    const bottom = 34;
    const plotW = width - left - right;
    const plotH = height - top - bottom;
    const ks = points.map((p) => p.k);
    const kMin = Math.min(...ks);
    const kMax = Math.max(...ks);
    const inset = 28; // keeps the first and last value labels clear of the axis labels
    const x = (k) =>
      left + inset + (kMax === kMin ? (plotW - 2 * inset) / 2 : ((k - kMin) / (kMax - kMin)) * (plotW - 2 * inset));
    const y = (v) => top + (1 - v) * plotH;
    const svg = s("svg", { class: "chart", viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "pass^k" });
    for (const tick of [0, 0.25, 0.5, 0.75, 1]) {
      svg.append(s("line", { class: "axis", x1: left, x2: width - right, y1: y(tick), y2: y(tick) }));
      svg.append(s("text", { class: "muted", x: left - 8, y: y(tick) + 4, "text-anchor": "end" }, tick.toFixed(2)));
    }
    const valid = points.filter((p) => p.value != null);
    if (valid.length) {
      svg.append(s("polyline", { class: "line", points: valid.map((p) => x(p.k) + "," + y(p.value)).join(" ") }));
    }
    for (const p of points) {
      svg.append(s("text", { class: "muted", x: x(p.k), y: height - 10, "text-anchor": "middle" }, "k=" + p.k));
      if (p.value == null) continue;
      if (p.ci95) {
        const bar = s("g", { class: "ci", "data-ci": "pass_hat_" + p.k }, s("title", null, "95% interval " + p.ci95[0].toFixed(4) + " to " + p.ci95[1].toFixed(4)));
        bar.append(s("line", { x1: x(p.k), x2: x(p.k), y1: y(p.ci95[0]), y2: y(p.ci95[1]) }));
        bar.append(s("line", { x1: x(p.k) - 5, x2: x(p.k) + 5, y1: y(p.ci95[0]), y2: y(p.ci95[0]) }));
        bar.append(s("line", { x1: x(p.k) - 5, x2: x(p.k) + 5, y1: y(p.ci95[1]), y2: y(p.ci95[1]) }));
        svg.append(bar);
      }
      svg.append(s("circle", { class: "dot", cx: x(p.k), cy: y(p.value), r: 4 }));
      svg.append(
        s("text", { x: x(p.k), y: y(p.value) - 9, "text-anchor": "middle", "data-metric": "pass_hat_" + p.k }, p.value.toFixed(3))
      );
    }
    return svg;
  }

  /** Differences around zero: items {label, delta (fraction), text}. */
  function deltaChart(items) {
    const charW = 6.8;
    const longest = (key) => items.reduce((n, item) => Math.max(n, String(item[key] == null ? "" : item[key]).length), 0);
    const labelW = Math.max(150, Math.ceil(longest("label") * charW) + 12);
    const textW = Math.max(80, Math.ceil(longest("text") * charW) + 12);
    const barW = Math.max(160, 460 - labelW - textW - 10);
    const width = labelW + barW + textW + 10;
    const rowH = 24;
    const mid = labelW + barW / 2;
    const maxAbs = Math.max(0.05, ...items.map((i) => Math.abs(i.delta || 0)));
    const height = items.length * rowH + 6;
    const svg = s("svg", { class: "chart", viewBox: "0 0 " + width + " " + height, role: "img", "aria-label": "rate differences" });
    svg.append(s("line", { class: "axis", x1: mid, x2: mid, y1: 0, y2: height }));
    items.forEach(function (item, i) {
      const y = i * rowH + 3;
      svg.append(s("text", { x: 0, y: y + 15 }, item.label));
      if (item.delta != null) {
        const w = (Math.abs(item.delta) / maxAbs) * (barW / 2);
        const cls = item.delta > 0 ? "pass" : item.delta < 0 ? "fail" : "na";
        svg.append(s("rect", { class: "bar " + cls, x: item.delta >= 0 ? mid : mid - w, y: y + 4, width: w, height: 14, rx: 2 }));
      }
      svg.append(s("text", { x: labelW + barW + 10, y: y + 15 }, item.text));
    });
    return svg;
  }

  // -- overview ---------------------------------------------------------------------------------

  function rateText(rate, unit) {
    if (!rate || rate.rate == null) return "n/a";
    return pct(rate.rate) + " (" + rate.passed + "/" + rate.total + (unit ? " " + unit : "") + ")";
  }

  function card(label, value, sub, key, tone, ci) {
    return h(
      "div",
      { class: "card" + (tone ? " " + tone : "") },
      h("div", { class: "label" }, label),
      h("div", { class: "value", "data-metric": key }, value),
      sub == null ? null : h("div", { class: "sub", "data-count": key }, sub),
      ci ? h("div", { class: "sub", "data-ci": key }, "95% CI " + ciText(ci)) : null
    );
  }

  function panel(title, ...kids) {
    return h("div", { class: "panel" }, h("h3", null, title), kids);
  }

  function numbersTable(head, rows, key) {
    return h(
      "table",
      { class: "nums", "data-table": key },
      h("thead", null, h("tr", null, head.map((label, i) => h("th", { class: i ? "num" : null }, label)))),
      h(
        "tbody",
        null,
        rows.map((cells) =>
          h("tr", { "data-key": cells[0] }, cells.map((cell, i) => h("td", { class: i ? "num" : null }, cell)))
        )
      )
    );
  }

  function renderOverview() {
    const root = $("#overview");
    const counts = S.counts;
    const lostReasons = S.lost_reasons || {};
    const signals = S.signals;
    const nl = signals.NL_ASSERTION;
    const notRun = S.not_run || [];

    const config = h(
      "div",
      { class: "config" },
      DATA.configuration.map(([label, value]) => h("div", { "data-config": label }, h("div", { class: "label" }, label), h("div", null, value)))
    );

    const cards = h(
      "div",
      { class: "cards" },
      card("Overall success", pct(S.success_rate.rate), S.success_rate.passed + "/" + S.success_rate.total + " scenarios", "success_rate", null, S.success_rate.ci95),
      card(
        "Task success (DB + NL)",
        pct(S.task_success_rate.rate),
        S.task_success_rate.passed + "/" + S.task_success_rate.total + " scenarios",
        "task_success_rate",
        null,
        S.task_success_rate.ci95
      ),
      card(
        "tau2 reward (mean)",
        S.tau2_reward.mean == null ? "n/a" : S.tau2_reward.mean.toFixed(4),
        "over " + S.tau2_reward.n + " scenarios",
        "tau2_reward"
      ),
      S.pass_hat_k.length
        ? card(
            "pass^" + S.pass_hat_k[S.pass_hat_k.length - 1].k,
            S.pass_hat_k[S.pass_hat_k.length - 1].value == null ? "n/a" : S.pass_hat_k[S.pass_hat_k.length - 1].value.toFixed(4),
            S.pass_hat_k[S.pass_hat_k.length - 1].tasks + " tasks",
            "pass_hat_max"
          )
        : null,
      S.judge_score.n ? card("Judge score (mean)", S.judge_score.mean.toFixed(3), "over " + S.judge_score.n + " scenarios", "judge_score") : null,
      card(
        "Scenarios",
        String(counts.expected),
        counts.succeeded + " passed, " + counts.failed + " failed" +
          (counts.not_run ? ", " + counts.not_run + " not run (budget)" : ""),
        "expected"
      ),
      card(
        "Infra errors / lost",
        counts.infra_errors + " / " + counts.lost,
        "excluded from every rate",
        "infra_errors",
        counts.infra_errors + counts.lost ? "bad" : null
      )
    );

    const signalItems = [
      { label: "Overall success", value: S.success_rate.rate, text: rateText(S.success_rate, "scenarios"), key: "signal-success", cls: "pass", ci: S.success_rate.ci95 },
      { label: "Task success", value: S.task_success_rate.rate, text: rateText(S.task_success_rate, "scenarios"), key: "signal-task", ci: S.task_success_rate.ci95 },
      { label: "DB-State match", value: signals.DB_STATE_MATCH.rate, text: rateText(signals.DB_STATE_MATCH, "scenarios"), key: "signal-DB_STATE_MATCH", ci: signals.DB_STATE_MATCH.ci95 },
      signals.CLEAN_EXIT.applicable === false
        ? { label: "Clean exit", value: null, text: "n/a (" + signals.CLEAN_EXIT.reason + ")", key: "signal-CLEAN_EXIT" }
        : { label: "Clean exit", value: signals.CLEAN_EXIT.rate, text: rateText(signals.CLEAN_EXIT, "scenarios"), key: "signal-CLEAN_EXIT", ci: signals.CLEAN_EXIT.ci95 },
      nl.applicable
        ? { label: "NL-Assertion pass", value: nl.rate, text: rateText(nl, "assertions"), key: "signal-NL_ASSERTION", ci: nl.ci95 }
        : { label: "NL-Assertion pass", value: null, text: "n/a (" + nl.reason + ")", key: "signal-NL_ASSERTION" },
      { label: "Action match (excluded)", value: signals.ACTION_MATCH.rate, text: rateText(signals.ACTION_MATCH, "scenarios"), key: "signal-ACTION_MATCH", cls: "alt", ci: signals.ACTION_MATCH.ci95 },
    ];
    // every rate with its 95% interval, as numbers (the charts draw them as error bars)
    const intervalRows = signalItems
      .filter((item) => item.value != null)
      .map((item) => [item.label, pct(item.value), ciText(item.ci)]);
    for (const [title, groups] of [["split", S.by_split], ["persona", S.by_persona]]) {
      for (const [name, group] of Object.entries(groups)) {
        intervalRows.push([title + " " + name, pct(group.success_rate), ciText(group.ci95)]);
      }
    }

    const stopEntries = Object.entries(S.stop_reasons);
    const stopTotal = stopEntries.reduce((sum, [, n]) => sum + n, 0) || 1;
    const stopItems = stopEntries.map(([reason, n]) => ({
      label: reason,
      value: n / stopTotal,
      text: n + " (" + pct(n / stopTotal) + ")",
      key: "stop-" + reason,
      cls: reason === "agent_exit" ? "pass" : reason === "user_stop" ? "alt" : reason === "infra_error" ? "infra" : "fail",
    }));

    const roles = Object.entries(S.token_usage);
    const tokenMax = Math.max(1, ...roles.map(([, u]) => u.prompt + u.completion));
    const tokenItems = [];
    for (const [role, usage] of roles) {
      tokenItems.push({ label: role + " prompt", value: usage.prompt / tokenMax, text: int(usage.prompt), key: "tokens-" + role + "-prompt" });
      tokenItems.push({ label: role + " completion", value: usage.completion / tokenMax, text: int(usage.completion), key: "tokens-" + role + "-completion", cls: "alt" });
    }

    function groupItems(groups, prefix) {
      return Object.entries(groups).map(([name, group]) => ({
        label: name,
        value: group.success_rate,
        text: pct(group.success_rate) + " (" + group.succeeded + "/" + group.n + ")",
        key: prefix + name,
        ci: group.ci95,
      }));
    }

    const charts = h(
      "div",
      { class: "grid2" },
      panel("Signals", barChart(signalItems, { title: "signal rates", labelW: 172, textW: 150 }), nl.applicable ? h("p", { class: "muted" }, nl.scenarios_passed + "/" + nl.scenarios + " scenarios with every assertion met") : null),
      panel(
        "Rates with 95% intervals",
        numbersTable(["rate", "value", "95% interval"], intervalRows, "intervals"),
        h("p", { class: "muted" }, "Wilson score intervals; a bootstrap over tasks where a task gives several units (trials, NL assertions).")
      ),
      S.pass_hat_k.length
        ? panel(
            "pass^k (" + S.trials + " trials)",
            lineChart(S.pass_hat_k),
            numbersTable(
              ["k", "pass^k", "95% interval", "tasks"],
              S.pass_hat_k.map((e) => [
                "pass^" + e.k,
                e.value == null ? "n/a" : e.value.toFixed(4),
                e.ci95 ? "[" + e.ci95[0].toFixed(4) + ", " + e.ci95[1].toFixed(4) + "]" : "n/a",
                String(e.tasks),
              ]),
              "pass_hat_k"
            )
          )
        : null,
      S.trials > 1
        ? panel(
            "Flaky tasks (trials disagree)",
            (S.flaky_tasks || []).length
              ? h(
                  "ul",
                  { class: "list", id: "flaky-list" },
                  S.flaky_tasks.map((t) => h("li", { "data-task": t.task_id }, "task " + t.task_id + ": " + t.passed + "/" + t.trials + " trials passed"))
                )
              : h("p", { class: "muted" }, "None: every task's trials agree."),
            h("p", { class: "muted" }, "A regression hides here first. Filter the table with Result: flaky tasks.")
          )
        : null,
      panel("Stop reasons", stopItems.length ? barChart(stopItems, { title: "stop reasons" }) : h("p", { class: "muted" }, "no scenarios")),
      panel(
        "Token usage by role",
        barChart(tokenItems, { title: "tokens by role" }),
        numbersTable(
          ["role", "calls", "prompt", "completion", "from cache"],
          roles.map(([role, u]) => [role, int(u.n_calls), int(u.prompt), int(u.completion), int(u.cache_hits || 0)]),
          "token_usage"
        ),
        S.cost || S.not_run_cost || S.interrupted_cost
          ? numbersTable(
              ["cost (USD)", "agent", "user", "judge", "total"],
              [
                S.cost ? ["run", usd(S.cost.agent), usd(S.cost.user), usd(S.cost.judge), usd(S.cost.total)] : null,
                // what the scenarios the budget, or what stopped them in flight (an interrupt,
                // -x...), stopped had spent: no record, not in the run's total
                S.not_run_cost ? ["stopped by the budget (no record)", "", "", "", usd(S.not_run_cost)] : null,
                S.interrupted_cost
                  ? [
                      (DATA.interrupted_by ? "stopped by " + DATA.interrupted_by : "stopped in flight") + " (no record)",
                      "",
                      "",
                      "",
                      usd(S.interrupted_cost),
                    ]
                  : null,
              ].filter(Boolean),
              "cost"
            )
          : null,
        S.cost && S.cost.unpriced_models.length
          ? h("p", { class: "muted" }, "No price for " + S.cost.unpriced_models.join(", ") + ": set --tau2-prices.")
          : null
      ),
      panel("Success by split", barChart(groupItems(S.by_split, "split-"), { title: "success by split" })),
      panel("Success by persona", barChart(groupItems(S.by_persona, "persona-"), { title: "success by persona" })),
      panel(
        "Infra errors and lost scenarios",
        S.infra_errors.length || S.lost.length
          ? h(
              "ul",
              { class: "list", id: "infra-list" },
              S.infra_errors.map((e) =>
                h("li", null, h("a", { href: scenarioHref(e.scenario_id) }, String(e.scenario_id)), ": ", e.detail || "no detail")
              ),
              // each with its reason, as all_summary.txt gives it (not run (interrupted), ...)
              S.lost.map((id) => h("li", null, String(id), ": ", lostReasons[id] || "lost (no metrics)"))
            )
          : h("p", { class: "muted" }, notRun.length ? "None." : "None: every expected scenario was scored.")
      ),
      // the scenarios the budget kept from starting or stopped unscored: neither lost nor scored
      notRun.length
        ? panel(
            "Not run (budget)",
            h("ul", { class: "list", id: "not-run-list" }, notRun.map((id) => h("li", null, String(id)))),
            h("p", { class: "muted" }, "--tau2-max-cost stopped them unscored; a resume runs them.")
          )
        : null
    );

    fill(root, h("h2", null, "Overview"), cards, panel("Configuration", config), charts);
  }

  // -- comparison -------------------------------------------------------------------------------

  function renderComparison() {
    if (!CMP) return;
    const root = $("#comparison");
    root.hidden = false;
    $("#filter-change-label").hidden = false;
    const deltaText = (e) =>
      e.delta == null ? "n/a" : e.kind === "rate" ? (e.delta >= 0 ? "+" : "") + (100 * e.delta).toFixed(2) + " pp" : (e.delta >= 0 ? "+" : "") + e.delta.toFixed(4);
    const valueText = (e, side) =>
      e[side] == null ? "n/a" : e.kind === "rate" ? pct(e[side]) + " (" + e[side + "_text"] + ")" : e[side].toFixed(4);
    const rows = CMP.rates.filter((e) => e.current != null || e.baseline != null);
    const table = h(
      "table",
      { class: "nums", "data-table": "comparison" },
      h("thead", null, h("tr", null, h("th", null, "figure"), h("th", { class: "num" }, "this run"), h("th", { class: "num" }, "baseline"), h("th", { class: "num" }, "difference"))),
      h(
        "tbody",
        null,
        rows.map((e) =>
          h(
            "tr",
            { "data-key": e.name },
            h("td", null, e.name),
            h("td", { class: "num" }, valueText(e, "current")),
            h("td", { class: "num" }, valueText(e, "baseline")),
            h("td", { class: "num " + (e.delta > 0 ? "delta-up" : e.delta < 0 ? "delta-down" : "") }, deltaText(e))
          )
        )
      )
    );
    const chartItems = rows
      .filter((e) => e.kind === "rate" && (e.group === "headline" || e.group === "signal"))
      .map((e) => ({ label: e.name, delta: e.delta, text: deltaText(e) }));
    const kinds = [
      ["fixed", "Fixed (now passing)"],
      ["broken", "Broken (now failing)"],
      ["changed", "Other changes (infra errors)"],
    ];
    const flipLists = kinds.map(([kind, title]) => {
      const flips = CMP.flips.filter((f) => f.kind === kind);
      return h(
        "div",
        { "data-flips": kind },
        h("b", null, title + ": " + flips.length),
        flips.length
          ? h(
              "ul",
              { class: "list" },
              flips.map((f) =>
                h(
                  "li",
                  null,
                  h("a", { href: scenarioHref(f.id) }, f.id),
                  " " + f.baseline + " \u2192 " + f.current,
                  f.signals.length ? h("span", { class: "muted" }, " (" + f.signals.join(", ") + " changed)") : null
                )
              )
            )
          : null
      );
    });
    const only = [];
    if (CMP.only_current.length) only.push(h("p", { class: "muted" }, CMP.only_current.length + " scenarios only in this run"));
    if (CMP.only_baseline.length) only.push(h("p", { class: "muted" }, CMP.only_baseline.length + " scenarios only in the baseline"));
    const P = CMP.paired;
    const paired = P
      ? h(
          "p",
          { "data-paired": "" },
          "Paired by task and trial: " + P.pairs + " pairs, " + P.broken + " pass\u2192fail, " + P.fixed + " fail\u2192pass; one-sided exact McNemar p = " + Number(P.p_value.toPrecision(3)) +
            (P.difference == null ? "" : "; difference " + (P.difference >= 0 ? "+" : "") + (100 * P.difference).toFixed(2) + " pp " + ciText(P.ci95))
        )
      : null;
    fill(
      root,
      h("h2", null, "Compared with ", h("span", { class: "mono" }, CMP.name)),
      paired,
      h("p", { class: "muted" }, "Baseline: agent " + (CMP.models.agent || "not recorded") + ", user " + (CMP.models.user || "not recorded") + ", judge " + (CMP.models.judge || "none") + ", " + CMP.trials + " trial(s). Differences are this run minus the baseline."),
      h("div", { class: "grid-compare" }, panel("Rate differences", deltaChart(chartItems), table), panel("Flipped scenarios", flipLists, only))
    );
  }

  // -- the scenario table -----------------------------------------------------------------------

  const COLUMNS = [
    { key: "id", label: "Scenario", width: "minmax(150px, 1.5fr)", sort: (r) => r.idx },
    { key: "split", label: "Split", width: "64px" },
    { key: "persona", label: "Persona", width: "minmax(90px, 1fr)" },
    { key: "status", label: "Result", width: "76px" },
    { key: "db", label: "DB", width: "44px", title: "DB_STATE_MATCH" },
    { key: "exit", label: "Exit", width: "44px", title: "CLEAN_EXIT" },
    { key: "nl", label: "NL", width: "54px", title: "NL assertions met", sort: (r) => (r.nl_passed == null ? null : r.nl_total ? r.nl_passed / r.nl_total : 1) },
    { key: "action", label: "Action", width: "64px", title: "ACTION_MATCH (excluded)" },
    { key: "stop", label: "Stop reason", width: "minmax(110px, 1fr)" },
    { key: "turns", label: "Turns", width: "60px", num: true },
    { key: "duration", label: "Duration", width: "80px", num: true },
    { key: "tokens", label: "Tokens", width: "84px", num: true },
  ];
  if (S.cost) COLUMNS.push({ key: "cost", label: "Cost", width: "84px", num: true, title: "USD (--tau2-prices)" });
  if (CMP) {
    COLUMNS.push({
      key: "baseline",
      label: "Baseline",
      width: "86px",
      sort: (r) => (CMP.baseline_status[r.id] == null ? null : CMP.baseline_status[r.id]),
    });
  }

  const state = { sortKey: "id", sortDir: 1, view: ROWS.slice() };
  const filters = {
    status: $("#filter-status"),
    signal: $("#filter-signal"),
    stop: $("#filter-stop"),
    split: $("#filter-split"),
    persona: $("#filter-persona"),
    change: $("#filter-change"),
    text: $("#filter-text"),
  };
  const tableRoot = $("#table");
  const head = h("div", { class: "vt-head", role: "row" });
  const body = h("div", { class: "vt-body", tabindex: "-1" });
  const spacer = h("div", { class: "vt-spacer" });
  body.append(spacer);
  tableRoot.style.setProperty("--cols", COLUMNS.map((c) => c.width).join(" "));
  tableRoot.append(head, body);

  function fillSelect(select, values) {
    for (const value of values) select.append(h("option", { value: value }, value));
  }

  function distinct(key) {
    return Array.from(new Set(ROWS.map((r) => r[key]).filter((v) => v != null).map(String))).sort();
  }

  function renderHead() {
    head.replaceChildren(
      ...COLUMNS.map((c) =>
        h(
          "div",
          {
            role: "columnheader",
            class: c.num ? "num" : null,
            title: c.title ? c.title + " (click to sort)" : "click to sort",
            "data-col": c.key,
            "aria-sort": state.sortKey === c.key ? (state.sortDir > 0 ? "ascending" : "descending") : null,
            onclick: function () {
              if (state.sortKey === c.key) state.sortDir = -state.sortDir;
              else {
                state.sortKey = c.key;
                state.sortDir = 1;
              }
              applyFilters();
            },
          },
          c.label
        )
      )
    );
  }

  function matches(row, f) {
    if (f.status === "failed" && row.status !== "FAIL") return false;
    if (f.status === "passed" && row.status !== "PASS") return false;
    if (f.status === "infra" && row.status !== "INFRA") return false;
    if (f.status === "flaky" && !FLAKY.has(String(row.task))) return false;
    if (f.signal === "db" && row.db !== 0) return false;
    if (f.signal === "exit" && row.exit !== 0) return false;
    if (f.signal === "nl" && !(row.nl_passed != null && row.nl_passed < row.nl_total)) return false;
    if (f.signal === "action" && row.action !== 0) return false;
    if (f.stop && String(row.stop) !== f.stop) return false;
    if (f.split && String(row.split) !== f.split) return false;
    if (f.persona && String(row.persona) !== f.persona) return false;
    if (f.change) {
      const flip = FLIPS.get(row.id);
      if (!flip) return false;
      if (f.change !== "flipped" && flip.kind !== f.change) return false;
    }
    for (const term of f.terms) if (!row.search.includes(term)) return false;
    return true;
  }

  function applyFilters() {
    const f = {
      status: filters.status.value,
      signal: filters.signal.value,
      stop: filters.stop.value,
      split: filters.split.value,
      persona: filters.persona.value,
      change: filters.change.value,
      terms: filters.text.value.toLowerCase().split(/\s+/).filter(Boolean),
    };
    const column = COLUMNS.find((c) => c.key === state.sortKey) || COLUMNS[0];
    const key = column.sort || ((r) => r[column.key]);
    const dir = state.sortDir;
    state.view = ROWS.filter((r) => matches(r, f)).sort(function (a, b) {
      const x = key(a);
      const y = key(b);
      if (x == null && y == null) return a.idx - b.idx;
      if (x == null) return 1;
      if (y == null) return -1;
      if (x < y) return -dir;
      if (x > y) return dir;
      return a.idx - b.idx;
    });
    $("#scenario-count").textContent =
      "Showing " + state.view.length + " of " + ROWS.length + " scenarios" + (state.view.length ? "" : ": no scenario matches the filters");
    renderHead();
    spacer.style.height = state.view.length * ROW_H + "px";
    body.scrollTop = 0;
    paint();
  }

  function cell(row, column) {
    switch (column.key) {
      case "status":
        return statusBadge(row.status);
      case "db":
        return flag(row.db, "DB_STATE_MATCH");
      case "exit":
        return flag(row.exit, "CLEAN_EXIT");
      case "action":
        return flag(row.action, "ACTION_MATCH");
      case "nl":
        if (row.nl_passed == null) return h("span", { class: "na", title: "not applicable" }, row.nl_total ? "n/a" : "\u2013");
        return h("span", { class: row.nl_passed < row.nl_total ? "no" : "ok" }, row.nl_passed + "/" + row.nl_total);
      case "duration":
        return seconds(row.duration);
      case "tokens":
        return int(row.tokens);
      case "cost":
        return usd(row.cost);
      case "baseline": {
        const before = CMP.baseline_status[row.id];
        if (before == null) return h("span", { class: "na" }, "new");
        const flip = FLIPS.get(row.id);
        return flip ? h("span", { class: flip.kind === "fixed" ? "ok" : "no", title: before + " \u2192 " + row.status }, before + " \u2192") : h("span", { class: "na" }, before);
      }
      default:
        return row[column.key] == null ? "-" : String(row[column.key]);
    }
  }

  function rowElement(row, position) {
    const link = h("a", {
      class: "vt-row",
      role: "row",
      href: scenarioHref(row.id),
      "data-id": row.id,
      "data-status": row.status,
    });
    link.style.top = position * ROW_H + "px";
    for (const column of COLUMNS) {
      link.append(h("span", { role: "gridcell", class: column.num ? "num" : null, "data-col": column.key }, cell(row, column)));
    }
    return link;
  }

  let painting = false;
  function paint() {
    painting = false;
    const height = body.clientHeight || 600;
    const first = Math.max(0, Math.floor(body.scrollTop / ROW_H) - 10);
    const last = Math.min(state.view.length, Math.ceil((body.scrollTop + height) / ROW_H) + 10);
    const fragment = document.createDocumentFragment();
    for (let i = first; i < last; i++) fragment.append(rowElement(state.view[i], i));
    if (!state.view.length) fragment.append(h("div", { class: "empty" }, "No scenario matches the filters."));
    spacer.replaceChildren(fragment);
  }
  body.addEventListener("scroll", function () {
    if (!painting) {
      painting = true;
      requestAnimationFrame(paint);
    }
  });
  window.addEventListener("resize", () => requestAnimationFrame(paint));

  function setupFilters() {
    fillSelect(filters.stop, distinct("stop"));
    fillSelect(filters.split, distinct("split"));
    fillSelect(filters.persona, distinct("persona"));
    for (const key of ["status", "signal", "stop", "split", "persona", "change"]) {
      filters[key].addEventListener("change", applyFilters);
    }
    let timer = null;
    filters.text.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(applyFilters, 120);
    });
    $("#filter-reset").addEventListener("click", function () {
      for (const key of Object.keys(filters)) filters[key].value = "";
      state.sortKey = "id";
      state.sortDir = 1;
      applyFilters();
    });
  }

  // -- the scenario view ------------------------------------------------------------------------

  function toolCall(call, result) {
    const [, name, rawArgs] = call;
    const args = text(rawArgs);
    const failed = result && result.e;
    return h(
      "details",
      { class: "call" + (failed ? " error" : "") },
      h(
        "summary",
        null,
        (failed ? "\u2717 " : "\u2192 ") + name + "(" + clip(args.replace(/\s+/g, " "), 90) + ")"
      ),
      h(
        "div",
        null,
        h("div", { class: "label" }, "arguments"),
        h("pre", null, pretty(rawArgs)),
        h("div", { class: "label" }, result ? (failed ? "result (error)" : "result") : "no result recorded"),
        result ? h("pre", { class: "result" }, pretty(result.c)) : null
      )
    );
  }

  function who(role, message) {
    const label = role === "assistant" ? "agent" : role === "tool" ? "tool " + (message.n || "") : role;
    return h("div", { class: "who" }, h("b", null, label), message.t != null ? h("span", null, "+" + seconds(message.t)) : null);
  }

  function chat(messages) {
    const results = new Map();
    for (const message of messages) if (message.r === "tool" && message.i != null) results.set(message.i, message);
    const shown = new Set();
    const root = h("div", { class: "chat" });
    for (const message of messages) {
      if (message.r === "tool") {
        if (message.i != null && shown.has(message.i)) continue;
        root.append(h("div", { class: "msg tool" }, who("tool", message), h("pre", { class: "text" }, pretty(message.c))));
        continue;
      }
      if (message.r === "system") {
        root.append(h("details", { class: "msg system" }, h("summary", null, "system prompt"), h("pre", { class: "text" }, text(message.c))));
        continue;
      }
      const content = text(message.c);
      const calls = message.k || [];
      const bubble = h("div", { class: "msg " + (message.r === "user" ? "user" : "assistant"), "data-role": message.r }, who(message.r, message));
      if (content.trim()) bubble.append(h("div", { class: "text" }, content));
      else if (!calls.length) bubble.append(h("div", { class: "empty-text" }, "(empty reply)"));
      for (const call of calls) {
        const result = results.get(call[0]);
        if (result) shown.add(call[0]);
        bubble.append(toolCall(call, result));
      }
      root.append(bubble);
    }
    if (!messages.length) root.append(h("p", { class: "muted" }, "No transcript recorded."));
    return root;
  }

  function diffView(row, d) {
    const root = h("div", { id: "db-diff" });
    if (row.db === 1) {
      root.append(h("p", { class: "ok" }, "The final database equals the expected state."));
    } else if (!d.db.length) {
      root.append(h("p", { class: "muted" }, row.db == null ? "Not scored (infra error)." : "No record-level difference was recorded."));
    }
    for (const record of d.db) {
      const kindText =
        record.kind === "missing" ? "missing from the actual database" : record.kind === "unexpected" ? "not in the expected database" : record.fields.length + " field(s) differ";
      const table = h(
        "table",
        { class: "diff" },
        h("thead", null, h("tr", null, h("th", null, "field"), h("th", null, "expected"), h("th", null, "actual"))),
        h(
          "tbody",
          null,
          record.fields.map(([path, expected, actual]) =>
            h(
              "tr",
              null,
              h("td", null, path || "(record)"),
              h("td", { class: "exp" }, expected == null ? h("span", { class: "na" }, "(absent)") : pretty(expected)),
              h("td", { class: "act" }, actual == null ? h("span", { class: "na" }, "(absent)") : pretty(actual))
            )
          )
        )
      );
      if (!record.fields.length) table.append(h("tr", null, h("td", { colspan: 3 }, "(the canonical forms differ; no field differs exactly)")));
      root.append(
        h(
          "div",
          { class: "record", "data-table": record.table },
          h("div", { class: "record-head" }, h("span", { class: "badge" }, record.table), h("span", { class: "key" }, record.key), h("span", { class: "muted" }, kindText)),
          table
        )
      );
    }
    if (d.hashes && d.hashes[0]) {
      root.append(h("p", { class: "muted mono" }, "expected " + String(d.hashes[0]).slice(0, 16) + "\u2026, actual " + String(d.hashes[1]).slice(0, 16) + "\u2026"));
    }
    return root;
  }

  function actionBox(action, cls, note) {
    return h(
      "div",
      { class: "action " + cls },
      h("div", null, h("span", { class: "name" }, action.name), " ", h("span", { class: "muted" }, note)),
      h("pre", null, JSON.stringify(action.arguments, null, 2))
    );
  }

  function actionsView(d) {
    const used = new Map();
    d.pairs.forEach((recordedIndex, refIndex) => {
      if (recordedIndex >= 0) used.set(recordedIndex, refIndex);
    });
    const reference = d.reference.map((a, i) =>
      d.pairs[i] >= 0 ? actionBox(a, "matched", "\u2713 made (recorded #" + (d.pairs[i] + 1) + ")") : actionBox(a, "unmatched", "\u2717 not made")
    );
    const recorded = d.recorded.map((a, j) =>
      used.has(j) ? actionBox(a, "matched", "\u2713 reference #" + (used.get(j) + 1)) : actionBox(a, "extra", "extra (allowed)")
    );
    return h(
      "div",
      { id: "actions" },
      h(
        "div",
        { class: "actions" },
        h("div", null, h("b", null, "Reference (" + d.reference.length + ")"), reference.length ? reference : h("p", { class: "muted" }, "no write actions")),
        h("div", null, h("b", null, "Recorded (" + d.recorded.length + ")"), recorded.length ? recorded : h("p", { class: "muted" }, "no write actions"))
      ),
      h("p", { class: "muted" }, "ACTION_MATCH is reported but excluded from success.")
    );
  }

  function assertionsView(d) {
    const root = h("div", { id: "assertions" });
    if (d.judge) {
      root.append(
        h(
          "p",
          null,
          h("b", null, "Judge score " + (d.judge.score == null ? "n/a" : d.judge.score.toFixed(2))),
          d.judge.reason ? ": " : null,
          d.judge.reason || null
        )
      );
      if (d.judge.error) root.append(h("p", { class: "no" }, "Judge error: " + d.judge.error));
    } else if (d.assertions.length) {
      root.append(h("p", { class: "muted" }, "Not judged: no judge was configured."));
    }
    for (const a of d.assertions) {
      const verdict = a.passed == null ? h("span", { class: "badge" }, "not judged") : a.passed ? h("span", { class: "badge pass" }, "met") : h("span", { class: "badge fail" }, "not met");
      root.append(
        h(
          "div",
          { class: "assertion", "data-passed": a.passed == null ? "na" : String(a.passed) },
          h("div", null, verdict, " ", h("b", null, "#" + a.index), " ", a.text),
          a.reason ? h("div", { class: "reason" }, a.reason) : null
        )
      );
    }
    if (!d.assertions.length) root.append(h("p", { class: "muted" }, "This task has no NL assertions."));
    return root;
  }

  function signalBadge(label, value, extra) {
    const cls = value == null ? "" : value ? "pass" : "fail";
    const mark = value == null ? "n/a" : value ? "\u2713" : "\u2717";
    return h("span", { class: "badge " + cls }, label + " " + mark + (extra ? " " + extra : ""));
  }

  function showScenario(index) {
    const row = ROWS[index];
    const d = detail(index) || { messages: [], db: [], reference: [], recorded: [], pairs: [], assertions: [], judge: null, problems: ["details missing"], usage: {} };
    const root = $("#scenario-view");
    const order = state.view.some((r) => r.idx === index) ? state.view : ROWS;
    const position = order.findIndex((r) => r.idx === index);
    const prev = position > 0 ? order[position - 1] : null;
    const next = position >= 0 && position < order.length - 1 ? order[position + 1] : null;
    const tokens = Object.entries(d.usage || {}).map(([role, u]) => role + " " + int((u.prompt || 0) + (u.completion || 0)) + " (" + int(u.n_calls) + (int(u.n_calls) === 1 ? " call)" : " calls)"));
    const latency = Object.entries(d.latency || {})
      .filter(([, l]) => l && l.n)
      .map(([role, l]) => role + " p50 " + seconds(l.p50) + ", p95 " + seconds(l.p95));
    const facts = [
      ["task", row.task],
      ["trial", row.trial == null || S.trials < 2 ? null : row.trial + " of " + S.trials],
      ["seed", row.seed],
      ["split", row.split],
      ["persona", row.persona],
      ["stop reason", String(row.stop) + (d.stop_detail ? ": " + d.stop_detail : "")],
      ["turns", row.turns],
      ["duration", seconds(row.duration)],
      ["tau2 reward", row.reward],
      ["judge score", row.judge],
      ["tokens", tokens.join(", ")],
      ["cost", S.cost ? usd(row.cost) : null],
      ["latency", latency.join("; ")],
      ["folder", d.folder],
    ];
    const nlExtra = row.nl_passed == null ? (row.nl_total ? "(not judged)" : "") : row.nl_passed + "/" + row.nl_total;
    const nlValue = row.nl_passed == null ? null : row.nl_passed >= row.nl_total;
    const toggle = h("button", { type: "button" }, "Expand tool calls");
    const conversation = chat(d.messages);
    toggle.addEventListener("click", function () {
      const open = toggle.textContent.startsWith("Expand");
      for (const el of conversation.querySelectorAll("details.call")) el.open = open;
      toggle.textContent = open ? "Collapse tool calls" : "Expand tool calls";
    });
    fill(
      root,
      h(
        "div",
        { class: "nav" },
        h("a", { href: "#", id: "back" }, "\u2190 All scenarios"),
        h("span", { class: "title" }, row.id),
        statusBadge(row.status),
        h("span", { class: "spacer" }),
        h("button", { type: "button", id: "prev", disabled: !prev, title: "previous in the table (p)", onclick: () => prev && (location.hash = scenarioHref(prev.id)) }, "\u2190 prev"),
        h("span", { class: "muted" }, position >= 0 ? position + 1 + " / " + order.length : ""),
        h("button", { type: "button", id: "next", disabled: !next, title: "next in the table (n)", onclick: () => next && (location.hash = scenarioHref(next.id)) }, "next \u2192")
      ),
      h(
        "div",
        { class: "facts" },
        facts.filter(([, v]) => v != null && v !== "").map(([k, v]) => h("span", null, k + " ", h("b", null, String(v))))
      ),
      h(
        "div",
        { class: "signals" },
        signalBadge("DB-State match", row.db == null ? null : row.db === 1),
        signalBadge("Clean exit", row.exit == null ? null : row.exit === 1),
        signalBadge("NL assertions", nlValue, nlExtra),
        signalBadge("Action match (excluded)", row.action == null ? null : row.action === 1)
      ),
      d.problems && d.problems.length ? h("div", { class: "problems" }, "Artifacts: " + d.problems.join("; ")) : null,
      h(
        "div",
        { class: "split" },
        h("div", null, h("div", { class: "panel", id: "conversation" }, h("div", { class: "nav" }, h("h3", null, "Conversation (" + d.messages.length + " messages)"), h("span", { class: "spacer" }), toggle), conversation)),
        h(
          "div",
          null,
          panel("Database: expected vs actual", diffView(row, d)),
          panel("Actions: reference vs recorded", actionsView(d)),
          panel("NL assertions", assertionsView(d))
        )
      )
    );
  }

  // -- routing ----------------------------------------------------------------------------------

  let overviewScroll = 0;
  function route() {
    const hash = location.hash;
    const overview = $("#overview-view");
    const scenario = $("#scenario-view");
    if (hash.startsWith("#s/")) {
      const index = BY_ID.get(decodeURIComponent(hash.slice(3)));
      if (index !== undefined) {
        if (!overview.hidden) overviewScroll = window.scrollY;
        overview.hidden = true;
        scenario.hidden = false;
        showScenario(index);
        window.scrollTo(0, 0);
        return;
      }
    }
    scenario.hidden = true;
    scenario.replaceChildren();
    const wasHidden = overview.hidden;
    overview.hidden = false;
    if (wasHidden) {
      window.scrollTo(0, overviewScroll);
      paint();
    }
  }

  document.addEventListener("keydown", function (event) {
    if ($("#scenario-view").hidden || event.target.matches("input, select, textarea")) return;
    if (event.key === "Escape") location.hash = "#";
    else if (event.key === "n") $("#next").click();
    else if (event.key === "p") $("#prev").click();
  });
  window.addEventListener("hashchange", route);

  // -- start --------------------------------------------------------------------------------------

  $("#run-name").textContent = DATA.run.name;
  $("#generated").textContent = "generated " + DATA.generated;
  if (S.models && S.models.agent && String(S.models.agent).startsWith("builtin:")) {
    const badge = $("#run-badge");
    badge.textContent = "built-in agent (" + S.models.agent + "): measures the harness, not a model";
    badge.classList.add("warn");
    badge.hidden = false;
  }
  renderOverview();
  renderComparison();
  setupFilters();
  applyFilters();
  route();
  document.body.dataset.renderMs = String(Math.round(performance.now() - started));
  document.body.dataset.ready = "1";
})();
