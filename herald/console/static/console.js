// Herald's console: small enhancements of pages that work without this script.
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.remove("no-js");
  root.classList.add("js");

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // Herald.fetchFragment(url): GET a fragment of a page with the session (for live parts).
  // Herald.post(url, body): a same-origin POST that carries the CSRF token in its header.
  window.Herald = {
    csrfToken: csrfToken,
    post: function (url, body) {
      return fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": csrfToken(), "Accept": "application/json", "Content-Type": "application/json" },
        body: JSON.stringify(body || {})
      });
    },
    fetchFragment: function (url) {
      return fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } }).then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      });
    },
    // Herald.listen(url, handler): server-sent events (herald/console/sse.py); the browser reconnects by itself.
    listen: function (url, event, handler) {
      if (!window.EventSource) { return null; }
      var source = new EventSource(url);
      source.addEventListener(event, handler);
      return source;
    }
  };

  document.addEventListener("DOMContentLoaded", function () {
    // The Environment select submits its form when it changes (its "Show" button is for pages without script).
    document.querySelectorAll("[data-submit-on-change]").forEach(function (select) {
      select.addEventListener("change", function () { select.form.submit(); });
    });
    // Buttons that ask before they act.
    document.querySelectorAll("[data-confirm]").forEach(function (button) {
      button.addEventListener("click", function (event) {
        if (!window.confirm(button.getAttribute("data-confirm"))) { event.preventDefault(); }
      });
    });
    // Copy buttons: data-copy names the element whose text is copied.
    document.querySelectorAll("[data-copy]").forEach(function (button) {
      button.addEventListener("click", function () {
        var source = document.querySelector(button.getAttribute("data-copy"));
        if (source && navigator.clipboard) {
          navigator.clipboard.writeText(source.textContent.trim()).then(function () { button.textContent = "Copied"; });
        }
      });
    });
    // An error summary takes the focus, so a screen reader reads it first (GOV.UK's pattern).
    var summary = document.querySelector("[data-focus-on-load]");
    if (summary) { summary.focus(); }
  });
})();
