// Checks a JSON value typed in an action's form before it is sent, and says
// what is wrong beside it: a textarea with data-json must hold JSON; one
// with data-schema too must fit that JSON schema (the part of JSON Schema
// stalwart/core/expects.py checks, the same check the server makes again).
// Messages are set as text, never as HTML. Listeners sit on the document,
// so forms the live refresh swaps in are checked too.
(function () {
  "use strict";

  var MAX_DEPTH = 64;
  var MAX_PROBLEMS = 20;
  var MAX_CHECKS = 100000; // steps one check takes at most, as expects.py's
  var TOO_COSTLY = {};

  function typeOf(v) {
    if (v === null) return "null";
    if (Array.isArray(v)) return "array";
    if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
    if (typeof v === "boolean") return "boolean";
    if (typeof v === "string") return "string";
    return "object";
  }

  function is(v, name) {
    var t = typeOf(v);
    if (name === "number") return t === "number" || t === "integer";
    if (["object", "array", "string", "integer", "boolean", "null"].indexOf(name) < 0) return true;
    return t === name;
  }

  function same(a, b) {
    return JSON.stringify(a) === JSON.stringify(b);
  }

  // Each pointer is walked once a check (budget.refs), however often met.
  function resolve(schema, root, budget) {
    var ref = schema["$ref"];
    if (typeof ref !== "string") return schema;
    if (!budget.refs.has(ref)) budget.refs.set(ref, target(ref, root));
    return budget.refs.get(ref);
  }

  function target(ref, root) {
    if (ref.indexOf("#/") !== 0) return null;
    var node = root;
    ref.slice(2).split("/").forEach(function (part) {
      part = part.replace(/~1/g, "/").replace(/~0/g, "~");
      node = node !== null && typeof node === "object" && Object.prototype.hasOwnProperty.call(node, part) ? node[part] : null;
    });
    return node !== null && typeof node === "object" ? node : null;
  }

  // A check that would take more than MAX_CHECKS steps stops (a schema is
  // data: anyOf nested through $ref would otherwise take exponential time).
  function spend(budget, n) {
    budget.left -= n;
    if (budget.left < 0) throw TOO_COSTLY;
  }

  function bounds(n, schema, low, high, what, out) {
    if (typeof schema[low] === "number" && n < schema[low]) out.push(what + " must be at least " + schema[low]);
    if (typeof schema[high] === "number" && n > schema[high]) out.push(what + " must be at most " + schema[high]);
  }

  function check(v, schema, path, root, out, depth, budget) {
    if (out.length >= MAX_PROBLEMS) return;
    spend(budget, 1);
    if (depth > MAX_DEPTH) { out.push(path + ": nested deeper than " + MAX_DEPTH + " levels"); return; }
    if (schema === false) { out.push(path + ": no value is allowed here"); return; }
    if (schema === null || typeof schema !== "object" || Array.isArray(schema)) return;
    schema = resolve(schema, root, budget);
    if (schema === null) return;
    var either = schema.anyOf || schema.oneOf;
    if (Array.isArray(either) && either.length) {
      var tries = [];
      var fits = either.some(function (option) {
        var found = [];
        check(v, option, path, root, found, depth + 1, budget);
        tries.push(found);
        return found.length === 0;
      });
      if (!fits) {
        if (tries.length === 1) tries[0].forEach(function (p) { out.push(p); });
        else out.push(path + ": fits none of " + tries.length + " choices");
        return;
      }
    }
    var kinds = typeof schema.type === "string" ? [schema.type] : Array.isArray(schema.type) ? schema.type : null;
    if (kinds) spend(budget, kinds.length);
    if (kinds && !kinds.some(function (k) { return is(v, k); })) {
      out.push(path + ": expected " + kinds.join(" or ") + ", got " + typeOf(v));
      return;
    }
    if (Object.prototype.hasOwnProperty.call(schema, "const") && !same(v, schema["const"])) {
      out.push(path + ": must be " + JSON.stringify(schema["const"]));
    }
    if (Array.isArray(schema["enum"])) spend(budget, schema["enum"].length);
    if (Array.isArray(schema["enum"]) && !schema["enum"].some(function (c) { return same(v, c); })) {
      out.push(path + ": must be one of " + schema["enum"].slice(0, 10).map(function (c) { return JSON.stringify(c); }).join(", "));
    }
    var t = typeOf(v);
    if (t === "object") {
      var props = schema.properties && typeof schema.properties === "object" ? schema.properties : {};
      var required = Array.isArray(schema.required) ? schema.required : [];
      var names = Object.keys(v);
      spend(budget, required.length + names.length);
      required.forEach(function (name) {
        if (typeof name === "string" && !Object.prototype.hasOwnProperty.call(v, name)) out.push(path + "." + name + ": required, missing");
      });
      var extra = Object.prototype.hasOwnProperty.call(schema, "additionalProperties") ? schema.additionalProperties : true;
      var known = ""; // the fields a refused one is told of: listed once
      names.every(function (name) {
        if (out.length >= MAX_PROBLEMS) return false;
        var where = path + "." + name;
        if (Object.prototype.hasOwnProperty.call(props, name)) check(v[name], props[name], where, root, out, depth + 1, budget);
        else if (extra === false) {
          if (!known) {
            var all = Object.keys(props);
            spend(budget, all.length);
            known = all.sort().slice(0, 10).join(", ") || "none";
          }
          out.push(where + ": not expected (fields: " + known + ")");
        } else if (extra !== null && typeof extra === "object") check(v[name], extra, where, root, out, depth + 1, budget);
        return true;
      });
    } else if (t === "array") {
      bounds(v.length, schema, "minItems", "maxItems", path + ": item count", out);
      if (schema.items && typeof schema.items === "object" && !Array.isArray(schema.items)) {
        v.forEach(function (item, i) { check(item, schema.items, path + "[" + i + "]", root, out, depth + 1, budget); });
      }
    } else if (t === "string") {
      bounds(Array.from(v).length, schema, "minLength", "maxLength", path + ": length", out);
    } else if (t === "number" || t === "integer") {
      bounds(v, schema, "minimum", "maximum", path, out);
    }
  }

  // What is wrong with the textarea's text ([] when nothing is).
  function problems(area) {
    var text = area.value;
    if (area.getAttribute("data-json") === "payload" && text.trim() === "") text = "null";
    var value;
    try {
      value = JSON.parse(text);
    } catch (e) {
      return ["not JSON: " + e.message];
    }
    var schemaText = area.getAttribute("data-schema");
    if (!schemaText) return [];
    var schema;
    try { schema = JSON.parse(schemaText); } catch (e) { return []; }
    var out = [];
    try {
      check(value, schema, "answer", schema, out, 0, { left: MAX_CHECKS, refs: new Map() });
    } catch (e) {
      if (e !== TOO_COSTLY) throw e;
      return ["answer: not checked: the schema takes more than " + MAX_CHECKS + " steps to check against this value (anyOf or oneOf nested through $ref?)"];
    }
    return out.slice(0, MAX_PROBLEMS);
  }

  function show(area) {
    var found = problems(area);
    var form = area.form;
    var line = form ? form.querySelector(".check") : null;
    var message = found.length ? "Not sent yet: " + found.join("; ") : "";
    area.setAttribute("aria-invalid", found.length ? "true" : "false");
    if (line !== null) {
      line.textContent = message;
      line.classList.toggle("bad", found.length > 0);
    }
    return found.length === 0;
  }

  // A step's result too long to come with the page is loaded into its
  // fork form when the form is opened (or its editor focused), once.
  function load(area) {
    var source = area.getAttribute("data-source");
    if (!source || area.value !== "" || area.getAttribute("data-loaded")) return;
    area.setAttribute("data-loaded", "1");
    fetch(source, { credentials: "same-origin", headers: { Accept: "text/plain" } })
      .then(function (res) { return res.ok ? res.text() : null; })
      .then(function (text) {
        if (text !== null && area.value === "") {
          area.value = text;
          show(area);
        }
      })
      .catch(function () { area.removeAttribute("data-loaded"); });
  }

  document.addEventListener("toggle", function (event) {
    var details = event.target;
    if (!(details instanceof HTMLDetailsElement) || !details.open) return;
    details.querySelectorAll(":scope > form textarea[data-source]").forEach(load);
  }, true);

  document.addEventListener("focusin", function (event) {
    var area = event.target;
    if (area instanceof HTMLTextAreaElement && area.hasAttribute("data-source")) load(area);
  });

  document.addEventListener("input", function (event) {
    var area = event.target;
    if (area instanceof HTMLTextAreaElement && area.hasAttribute("data-json")) show(area);
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var area = form.querySelector("textarea[data-json]");
    if (area === null) return;
    var button = event.submitter;
    // Approve and reject send true or false: the textarea is not what they send.
    if (button && (button.value === "approve" || button.value === "reject")) return;
    if (!show(area)) {
      event.preventDefault();
      area.focus();
    }
  });
})();
