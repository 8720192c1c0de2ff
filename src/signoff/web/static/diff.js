// Diff viewers: a unified diff from the server (file edits), and a line diff of two texts
// (original vs edited arguments). Removed lines red, added green, with line numbers.

import { h } from "./dom.js";

function row(kind, oldNo, newNo, text) {
  const sign = kind === "del" ? "-" : kind === "add" ? "+" : " ";
  return h("tr", { class: `line ${kind}` },
    h("td", { class: "ln" }, oldNo ?? ""),
    h("td", { class: "ln" }, newNo ?? ""),
    h("td", { class: "sign" }, sign),
    h("td", { class: "code" }, text));
}

function table(rows, label) {
  return h("table", { class: "diff", "aria-label": label }, h("tbody", {}, rows));
}

/** A unified diff (as difflib writes it) as a table. */
export function unifiedDiff(text, label = "diff") {
  const rows = [];
  let oldNo = 0;
  let newNo = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("--- ") || line.startsWith("+++ ")) {
      rows.push(h("tr", { class: "line file" }, h("td", { colspan: 4 }, line)));
      continue;
    }
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (hunk) {
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[2]);
      rows.push(h("tr", { class: "line hunk" }, h("td", { colspan: 4 }, line)));
    } else if (line.startsWith("-")) {
      rows.push(row("del", oldNo++, null, line.slice(1)));
    } else if (line.startsWith("+")) {
      rows.push(row("add", null, newNo++, line.slice(1)));
    } else if (line.startsWith(" ")) {
      rows.push(row("ctx", oldNo++, newNo++, line.slice(1)));
    }
  }
  return table(rows, label);
}

/** The line diff of two texts (longest common subsequence), every line shown. */
export function lineDiff(before, after, label = "changes") {
  const a = before.split("\n");
  const b = after.split("\n");
  const n = a.length;
  const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const rows = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      rows.push(row("ctx", i + 1, j + 1, a[i]));
      i++; j++;
    } else if (i < n && (j >= m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      rows.push(row("del", i + 1, null, a[i]));
      i++;
    } else {
      rows.push(row("add", null, j + 1, b[j]));
      j++;
    }
  }
  return table(rows, label);
}
