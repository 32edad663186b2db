// dynscope report: tabs, toggles and the per-compile stage stepper.
// Every string that came from the capture is put into the page with textContent, never as HTML.
(() => {
  "use strict";

  // -- small DOM helpers ---------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = value;
      else if (key === "cls") node.className = value;
      else if (key.startsWith("data-")) node.setAttribute(key, value);
      else node[key] = value;
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  function show(node, visible) { node.hidden = !visible; }

  // -- page-level controls -------------------------------------------------------------------

  for (const swatch of document.querySelectorAll(".swatch[data-color]")) {
    swatch.style.background = swatch.dataset.color;
  }

  for (const tab of document.querySelectorAll("[data-rank-tab]")) {
    tab.addEventListener("click", () => {
      for (const other of document.querySelectorAll("[data-rank-tab]")) other.classList.toggle("active", other === tab);
      for (const rank of document.querySelectorAll("section.rank")) show(rank, rank.id === tab.dataset.rankTab);
    });
  }

  function toggle(button, force) {
    const target = document.getElementById(button.dataset.toggle);
    if (!target) return;
    const open = force === undefined ? target.hidden : force;
    show(target, open);
    button.setAttribute("aria-expanded", String(open));
    if (open && target.classList.contains("compile-detail")) openCompile(target);
  }

  for (const button of document.querySelectorAll("[data-toggle]")) {
    button.addEventListener("click", () => toggle(button));
  }

  // A top problem links to the item that explains it: open that item too.
  for (const link of document.querySelectorAll("a[data-open]")) {
    link.addEventListener("click", () => {
      const item = document.getElementById(link.dataset.open);
      const head = item && item.querySelector("[data-toggle]");
      if (head) toggle(head, true);
    });
  }

  // -- compile payloads: gzip + base64 JSON, decoded when a compile is first opened -------------

  async function decodePayload(id) {
    const script = document.getElementById(id);
    const bytes = Uint8Array.from(atob(script.textContent.trim()), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  const compiles = new WeakMap(); // compile-detail element -> its state
  let current = null; // the compile detail the keyboard steps through

  async function openCompile(detail) {
    current = detail;
    if (compiles.has(detail)) return;
    const state = { data: null, key: null, view: null, kernel: null };
    compiles.set(detail, state);
    const panel = detail.querySelector(".stage-panel");
    if (typeof DecompressionStream === "undefined") {
      panel.replaceChildren(el("p", { cls: "note", text: "This browser cannot decompress the report's data (it needs DecompressionStream)." }));
      return;
    }
    state.data = await decodePayload(detail.dataset.payload);
    for (const tab of detail.querySelectorAll(".stage-tab")) {
      tab.addEventListener("click", () => { current = detail; selectStage(detail, tab.dataset.stage); });
    }
    const first = [...detail.querySelectorAll(".stage-tab")].find((t) => !t.classList.contains("missing"));
    selectStage(detail, (first || detail.querySelector(".stage-tab")).dataset.stage);
  }

  function missingReason(detail, key) {
    const template = detail.querySelector("template.missing-reasons");
    const entry = [...template.content.querySelectorAll("span")].find((s) => s.dataset.key === key);
    return entry ? entry.textContent : "not recorded";
  }

  function selectStage(detail, key, view) {
    const state = compiles.get(detail);
    if (!state || !state.data) return;
    state.key = key;
    state.view = view || "text";
    for (const tab of detail.querySelectorAll(".stage-tab")) tab.classList.toggle("active", tab.dataset.stage === key);
    renderStage(detail, state);
  }

  function step(detail, delta) {
    const state = compiles.get(detail);
    if (!state || !state.key) return;
    const keys = [...detail.querySelectorAll(".stage-tab")].map((t) => t.dataset.stage);
    const next = keys.indexOf(state.key) + delta;
    if (next >= 0 && next < keys.length) selectStage(detail, keys[next]);
  }

  document.addEventListener("keydown", (event) => {
    if (!current || current.hidden || event.ctrlKey || event.metaKey || event.altKey) return;
    if (["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName)) return;
    if (event.key === "n" || event.key === "ArrowRight") step(current, 1);
    else if (event.key === "p" || event.key === "ArrowLeft") step(current, -1);
    else return;
    event.preventDefault();
  });

  // -- one stage ---------------------------------------------------------------------------

  function renderStage(detail, state) {
    const panel = detail.querySelector(".stage-panel");
    const stage = state.data.stages[state.key];
    if (!stage) {
      panel.replaceChildren(el("p", { cls: "missing-stage", text: `${state.key}: ${missingReason(detail, state.key)}` }));
      return;
    }
    const bar = el("div", { cls: "bar" }, el("span", { cls: "title", text: state.key }));
    const views = [["text", "stage"], ...Object.keys(stage.views).map((v) => [`view:${v}`, v])];
    if (stage.diff) views.push(["diff", `diff from ${stage.diff.from}`]);
    for (const [view, label] of views) {
      const button = el("button", { type: "button", cls: "view-btn" + (state.view === view ? " active" : ""), text: label, "data-view": view });
      button.addEventListener("click", () => { state.view = view; renderStage(detail, state); });
      bar.append(button);
    }
    const body = [bar];
    if (state.view === "diff" && stage.diff) {
      body.push(renderDiff(stage.diff));
    } else {
      const text = state.view.startsWith("view:") ? stage.views[state.view.slice(5)] : stage.text;
      body.push(highlighted(text, stage.language));
    }
    const kernel = state.data.kernels.find((k) => k.key === state.key);
    if (kernel) {
      state.kernel = kernel;
      body.push(renderProvenance(detail, state, kernel));
    }
    if (state.key.startsWith("output_code")) body.push(renderKernelList(detail, state));
    if (stage.graph) body.push(renderGraph(stage.graph));
    if (stage.nodes) body.push(renderNodes(stage.nodes, state.kernel));
    panel.replaceChildren(...body);
  }

  function renderDiff(diff) {
    const summary = el("ul", { cls: "summary" }, ...diff.summary.map((line) => el("li", { text: line })));
    const pre = el("pre", { cls: "diff" });
    for (const line of diff.lines) {
      const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
      pre.append(el("span", { cls, text: line + "\n" }));
    }
    const parts = [summary];
    if (diff.lines.length) parts.push(pre); else parts.push(el("p", { cls: "dim", text: "No text changes." }));
    if (diff.cut) parts.push(el("p", { cls: "note", text: "The text diff is cut short; `dynscope diff` prints all of it." }));
    return el("div", { cls: "stage-diff" }, ...parts);
  }

  function renderGraph(graph) {
    const box = el("div", { cls: "graph" }, el("h4", { text: "Graph" }));
    if (graph.svg) box.append(el("img", { src: "data:image/svg+xml;base64," + graph.svg, alt: "FX graph drawn by graphviz" }));
    else if (graph.dot) box.append(el("pre", { cls: "dot", text: graph.dot }));
    if (graph.note) box.append(el("p", { cls: "note", text: graph.note }));
    return box;
  }

  function renderNodes(nodes, kernel) {
    const marked = new Set(kernel ? [...kernel.post_grad_nodes, ...kernel.origin_nodes] : []);
    const rows = nodes.map(([name, op, target, shape, line]) =>
      el("tr", { cls: marked.has(name) ? "hl" : "", "data-node": name },
        el("td", { text: name }), el("td", { text: op }), el("td", { text: target }),
        el("td", { text: shape }), el("td", { text: line === null ? "" : String(line) })));
    const table = el("table", { cls: "grid nodes" },
      el("thead", {}, el("tr", {}, ...["node", "op", "target", "tensor", "line"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows));
    const title = kernel ? `Nodes (${marked.size} highlighted: computed by ${kernel.name})` : `Nodes (${nodes.length})`;
    return el("details", { cls: "node-table", open: Boolean(kernel) }, el("summary", { text: title }), table);
  }

  function renderKernelList(detail, state) {
    const graph = state.key.endsWith(".backward") ? "backward" : null;
    const kernels = state.data.kernels.filter((k) => (k.graph === "backward") === (graph === "backward"));
    const list = el("div", { cls: "kernel-list" });
    for (const kernel of kernels) {
      const chip = el("button", { type: "button", cls: "chip", text: kernel.name, "data-kernel": kernel.key });
      chip.addEventListener("click", () => selectStage(detail, kernel.key));
      list.append(chip);
    }
    return el("div", {}, el("h4", { text: `Kernels (${kernels.length})` }), list);
  }

  // A kernel's provenance: the post-grad nodes it computes, the Dynamo nodes they came from,
  // and the user's source lines. Clicking a node opens the post-grad graph with the kernel's
  // nodes highlighted.
  function renderProvenance(detail, state, kernel) {
    const postGrad = kernel.graph === "backward" ? "post_grad.backward" : "post_grad";
    const chips = (names) => names.map((name) => {
      const chip = el("button", { type: "button", cls: "chip hl", text: name, "data-node": name });
      chip.addEventListener("click", () => {
        state.kernel = kernel;
        selectStage(detail, postGrad);
        const row = detail.querySelector(`tr[data-node="${CSS.escape(name)}"]`);
        if (row) row.scrollIntoView({ block: "center" });
      });
      return chip;
    });
    const box = el("div", { cls: "provenance" },
      el("h4", { text: `Provenance of ${kernel.name}` + (kernel.provenance ? ` (from ${kernel.provenance === "torch" ? "torch's provenance tracking" : "Inductor's code comments"})` : "") }));
    if (kernel.launch) box.append(el("p", {}, "launched as ", el("code", { text: kernel.launch })));
    if (kernel.compile_time_s) box.append(el("p", { cls: "dim", text: `compiled in ${kernel.compile_time_s.toFixed(3)} s` }));
    box.append(el("div", {}, el("strong", { text: "computes post-grad nodes: " }), ...(kernel.post_grad_nodes.length ? chips(kernel.post_grad_nodes) : [el("span", { cls: "dim", text: "unknown" })])));
    if (kernel.origin_nodes.length) box.append(el("div", {}, el("strong", { text: "from Dynamo graph nodes: " }), ...kernel.origin_nodes.map((n) => el("span", { cls: "chip hl", text: n }))));
    if (kernel.lines.length) {
      box.append(el("strong", { text: "user source lines:" }));
      for (const ref of kernel.lines) {
        box.append(el("div", { cls: "where source-line", text: ref.where }));
        if (ref.excerpt) box.append(excerpt(ref.excerpt, ref.line));
      }
    } else {
      box.append(el("p", { cls: "dim", text: "No user source line was recorded for this kernel." }));
    }
    return box;
  }

  function excerpt(lines, marked) {
    const pre = el("pre", { cls: "excerpt" });
    for (const [no, text] of lines) {
      pre.append(el("span", { cls: "ln" + (no === marked ? " marked" : "") }, el("span", { cls: "no", text: String(no) }), text));
    }
    return pre;
  }

  // -- syntax highlighting: a few token classes, built as text nodes ------------------------

  const PY_KEYWORDS = "def|return|if|elif|else|for|while|in|is|not|and|or|import|from|class|with|as|None|True|False|lambda|pass|yield|assert|del|global|try|except|finally|raise";
  const CPP_KEYWORDS = "for|if|else|return|auto|const|int|long|float|double|void|bool|char|extern|static|static_cast|reinterpret_cast|using|namespace|template|typename|struct|inline|unsigned|signed|#include|#pragma";
  const TOKENS = {
    python: new RegExp(`(#.*$)|("(?:[^"\\\\]|\\\\.)*"|'(?:[^'\\\\]|\\\\.)*')|\\b(\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?)\\b|\\b(${PY_KEYWORDS})\\b`, "g"),
    cpp: new RegExp(`(\\/\\/.*$|\\/\\*.*?\\*\\/)|("(?:[^"\\\\]|\\\\.)*"|'(?:[^'\\\\]|\\\\.)')|\\b(\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?[fFlLuU]*)\\b|(${CPP_KEYWORDS})\\b`, "g"),
  };
  const LANGUAGE = { fx: "python", python: "python", triton: "python", extern: "python", cpp: "cpp" };
  const CLASSES = [null, "tok-com", "tok-str", "tok-num", "tok-kw"];

  function highlighted(text, language) {
    const pattern = TOKENS[LANGUAGE[language]];
    const pre = el("pre", { cls: "code" });
    const lines = text.split("\n");
    lines.forEach((line, i) => {
      const row = el("span", { cls: "ln" }, el("span", { cls: "no", text: String(i + 1) }));
      if (!pattern) {
        row.append(line);
      } else {
        let last = 0;
        for (const match of line.matchAll(pattern)) {
          const group = match.findIndex((g, j) => j > 0 && g !== undefined);
          row.append(line.slice(last, match.index), el("span", { cls: CLASSES[group], text: match[0] }));
          last = match.index + match[0].length;
        }
        row.append(line.slice(last));
      }
      pre.append(row);
    });
    return pre;
  }
})();
