/*
 * StorageOps browser helpers. Deliberately small: pages are rendered on the server and
 * htmx swaps server-rendered partials, so the only things left for JavaScript are the
 * theme toggle, the CSRF header of htmx requests and keeping charts legible in both themes.
 *
 * base.html loads this file in <head> without "defer", so the saved theme is applied
 * before the first paint (no white flash for dark-theme users). Everything that needs the
 * page waits for DOMContentLoaded.
 */
(function () {
  "use strict";

  var THEME_KEY = "storageops-theme";
  var root = document.documentElement;

  /* ---- Theme ------------------------------------------------------------------------ */

  function storedTheme() {
    try {
      var value = window.localStorage.getItem(THEME_KEY);
      return value === "light" || value === "dark" ? value : null;
    } catch (e) {
      return null; // storage blocked (private mode, strict policies): follow the system
    }
  }

  function systemTheme() {
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches
      ? "dark"
      : "light";
  }

  function effectiveTheme() {
    return storedTheme() || systemTheme();
  }

  function labelToggles() {
    var next = effectiveTheme() === "dark" ? "light" : "dark";
    document.querySelectorAll("[data-theme-toggle]").forEach(function (button) {
      button.textContent = next === "dark" ? "Dark theme" : "Light theme";
      button.setAttribute("aria-label", "Switch to the " + next + " theme");
    });
  }

  function setTheme(theme) {
    root.setAttribute("data-theme", theme);
    try {
      window.localStorage.setItem(THEME_KEY, theme);
    } catch (e) {
      /* the choice then lasts for this page only */
    }
    labelToggles();
    applyChartTheme();
  }

  // Apply a saved choice at once; without one, no attribute is set and the CSS follows
  // prefers-color-scheme, including when the system switches while the page is open.
  var saved = storedTheme();
  if (saved) root.setAttribute("data-theme", saved);

  /* ---- Charts ------------------------------------------------------------------------ */

  function cssVar(name) {
    return getComputedStyle(root).getPropertyValue(name).trim();
  }

  // Chart.js draws on a canvas, which CSS cannot reach: hand it the theme's colours as
  // defaults and redraw the charts already on the page.
  function applyChartTheme() {
    var Chart = window.Chart;
    if (!Chart || !Chart.defaults) return;
    Chart.defaults.color = cssVar("--text-muted");
    Chart.defaults.borderColor = cssVar("--border");
    Chart.defaults.font.family = cssVar("--font");
    Object.values(Chart.instances || {}).forEach(function (chart) {
      chart.update("none");
    });
  }

  /* ---- htmx: CSRF --------------------------------------------------------------------- */

  function readCookie(name) {
    var prefix = name + "=";
    var parts = document.cookie ? document.cookie.split(";") : [];
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i].trim();
      if (part.indexOf(prefix) === 0) return decodeURIComponent(part.slice(prefix.length));
    }
    return null;
  }

  function csrfToken() {
    // The cookie wins: Django rotates the token at login, and another tab may have logged
    // in since this page was rendered. The meta tag covers CSRF_COOKIE_HTTPONLY = True.
    var fromCookie = readCookie("csrftoken");
    if (fromCookie) return fromCookie;
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : null;
  }

  var SAFE_METHODS = { get: true, head: true, options: true, trace: true };

  // htmx fires htmx:configRequest on the element and it bubbles to document, so this
  // listener works although htmx itself is loaded later with "defer".
  document.addEventListener("htmx:configRequest", function (event) {
    var verb = (event.detail.verb || "get").toLowerCase();
    if (SAFE_METHODS[verb]) return;
    var token = csrfToken();
    if (token) event.detail.headers["X-CSRFToken"] = token;
  });

  // htmx leaves the page as it is when a request fails; say so instead of failing silently,
  // for instance when a polled run page loses the server.
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr ? event.detail.xhr.status : "";
    showAlert("The server answered " + status + " to the last update. Reload the page to try again.");
  });
  document.addEventListener("htmx:sendError", function () {
    showAlert("The server could not be reached. The page will update again once it is back.");
  });

  function showAlert(text) {
    var box = document.getElementById("messages");
    if (!box) return;
    var item = document.createElement("li");
    item.className = "error";
    item.setAttribute("role", "alert");
    item.textContent = text;
    box.replaceChildren(item);
  }

  /* ---- Start-up ----------------------------------------------------------------------- */

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-theme-toggle]").forEach(function (button) {
      button.addEventListener("click", function () {
        setTheme(effectiveTheme() === "dark" ? "light" : "dark");
      });
    });
    labelToggles();
    applyChartTheme();

    // Follow the system switching themes while the page is open, unless the user chose one.
    if (window.matchMedia) {
      var query = window.matchMedia("(prefers-color-scheme: dark)");
      var onChange = function () {
        if (!storedTheme()) {
          labelToggles();
          applyChartTheme();
        }
      };
      if (query.addEventListener) query.addEventListener("change", onChange);
    }
  });

  // A small public surface for page scripts (chart code reads theme colours through it).
  window.StorageOps = { cssVar: cssVar, applyChartTheme: applyChartTheme, csrfToken: csrfToken };
})();
