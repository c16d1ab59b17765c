// Live updates for the inspector's pages, with no framework and no build step.
//
// An element with data-live="<url>" is refreshed every data-every
// milliseconds with the HTML fragment the server renders at <url> (escaped
// there by the same templates as the full page). The fragment is parsed with
// DOMParser, which never runs scripts, and the Content-Security-Policy allows
// no inline script anyway. A region stops refreshing when the fragment holds
// [data-final] (a finished run), and pauses while the user types in it, so
// a payload being written is never wiped. A fragment holding [data-shown]
// (a run's) says what it shows: the next fetch sends that back as ?shown=,
// and the server answers 204 when nothing moved, leaving the region as it is.
(function () {
  "use strict";

  var UNCHANGED = {};

  function address(region, url) {
    var mark = region.querySelector("[data-shown]");
    if (mark === null) return url;
    var target = new URL(url, window.location.href);
    target.searchParams.set("shown", mark.getAttribute("data-shown"));
    return target.pathname + target.search;
  }

  function openKeys(region) {
    var keys = new Set();
    region.querySelectorAll("details[data-key]").forEach(function (d) {
      if (d.open) keys.add(d.getAttribute("data-key"));
    });
    return keys;
  }

  function swap(region, html) {
    var before = new Set();
    region.querySelectorAll("details[data-key]").forEach(function (d) {
      before.add(d.getAttribute("data-key"));
    });
    var open = openKeys(region);
    var doc = new DOMParser().parseFromString(html, "text/html");
    doc.querySelectorAll("details[data-key]").forEach(function (d) {
      var key = d.getAttribute("data-key");
      if (before.has(key)) d.open = open.has(key);
    });
    region.replaceChildren.apply(region, Array.from(doc.body.childNodes));
  }

  function busy(region) {
    return region.getAttribute("data-dirty") === "1" ||
      (document.activeElement !== null && document.activeElement !== document.body &&
       region.contains(document.activeElement) &&
       /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName));
  }

  function watch(region) {
    var url = region.getAttribute("data-live");
    var every = parseInt(region.getAttribute("data-every"), 10) || 2000;
    region.addEventListener("input", function () {
      region.setAttribute("data-dirty", "1");
    });
    function tick() {
      if (region.querySelector("[data-final]")) return;
      if (document.hidden || busy(region)) {
        window.setTimeout(tick, every);
        return;
      }
      fetch(address(region, url), { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (res) {
          if (res.status === 204) return UNCHANGED;
          return res.ok ? res.text() : null;
        })
        .then(function (html) {
          if (html === UNCHANGED) {
            region.setAttribute("data-refreshed", String(Date.now()));
          } else if (html !== null && !busy(region)) {
            swap(region, html);
            region.setAttribute("data-refreshed", String(Date.now()));
          }
        })
        .catch(function () { /* the server is restarting: try again later */ })
        .then(function () { window.setTimeout(tick, every); });
    }
    window.setTimeout(tick, every);
  }

  document.querySelectorAll("[data-live]").forEach(watch);
})();
