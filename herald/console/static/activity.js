// The Activity page: new runs appear, and runs whose status changed update, without a reload.
// The page works without this script (reload to see new runs); it listens to /console/live/activity
// (server-sent events, herald/console/sse.py) and on each event fetches the first page's rows again.
(function () {
  "use strict";

  document.addEventListener("DOMContentLoaded", function () {
    var table = document.querySelector("table[data-live-events]");
    if (!table || !window.Herald) { return; }
    var body = document.getElementById("activity-rows");
    var status = document.getElementById("activity-live-status");
    var fetching = false;
    var again = false;

    function rowsOf(html) {
      var parsed = new DOMParser().parseFromString("<table><tbody>" + html + "</tbody></table>", "text/html");
      return Array.prototype.slice.call(parsed.querySelectorAll("tr[data-run]"));
    }

    function merge(fresh) {
      var added = 0;
      var anchor = body.firstElementChild;
      fresh.forEach(function (row) {
        var id = row.getAttribute("data-run");
        var shown = body.querySelector('tr[data-run="' + id + '"]');
        if (shown) {
          // A run seen already: its status may have moved on.
          if (shown.getAttribute("data-status") !== row.getAttribute("data-status")) {
            shown.replaceWith(document.importNode(row, true));
          }
          anchor = body.querySelector('tr[data-run="' + id + '"]').nextElementSibling;
        } else {
          var imported = document.importNode(row, true);
          imported.classList.add("is-new");
          body.insertBefore(imported, anchor);
          added += 1;
        }
      });
      if (added) {
        var empty = document.getElementById("activity-empty");
        if (empty) { empty.remove(); }
        status.textContent = added === 1 ? "1 new run" : added + " new runs";
      }
    }

    function refresh() {
      if (fetching) { again = true; return; }
      fetching = true;
      window.Herald.fetchFragment(table.getAttribute("data-live-rows")).then(function (html) {
        merge(rowsOf(html));
      }).catch(function () {
        // The next event tries again; the page itself is still right as of its load.
      }).then(function () {
        fetching = false;
        if (again) { again = false; refresh(); }
      });
    }

    var source = window.Herald.listen(table.getAttribute("data-live-events"), "activity", refresh);
    // Runs stored between this page's answer and the stream's start: fetched once it is open.
    if (source) { source.addEventListener("open", refresh); }
  });
})();
