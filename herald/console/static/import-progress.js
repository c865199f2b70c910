// An import's page (subscribers_import_progress.html): the progress follows the import's events
// (herald/console/routes/subscribers.py); without this script the page refreshes itself instead.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var live = document.getElementById("import-live");
    if (!live || !window.Herald) { return; }
    var status = document.getElementById("import-status");
    if (!status || status.getAttribute("data-import-finished") === "yes") { return; }
    var fragment = live.getAttribute("data-import-fragment");
    var source = null;
    function refresh() {
      return window.Herald.fetchFragment(fragment).then(function (html) {
        live.innerHTML = html;
        var now = document.getElementById("import-status");
        if (now && now.getAttribute("data-import-finished") === "yes" && source) { source.close(); }
      });
    }
    source = window.Herald.listen(live.getAttribute("data-import-events"), "progress", refresh);
    if (!source) { return; }
    source.addEventListener("done", function () { source.close(); refresh(); });
  });
})();
