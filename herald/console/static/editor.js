// The workflow editor (templates/editor.html): the Preview region follows the step being typed in.
// Without this script, each step's "Preview" button asks the server for the whole page instead.
(function () {
  "use strict";
  var DELAY_MS = 300;

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("editor-form");
    var region = document.getElementById("preview");
    if (!form || !region || !window.Herald) { return; }
    var url = form.getAttribute("data-preview-url");
    var current = null;
    var timer = null;
    var asked = 0;

    function preview(step) {
      if (step === null) { return; }
      var body = new URLSearchParams(new FormData(form));
      body.delete("action");
      body.set("preview_step", String(step));
      var ticket = ++asked;
      fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": window.Herald.csrfToken(), "Accept": "text/html" },
        body: body
      }).then(function (response) {
        return response.text().then(function (text) { return { ok: response.ok, text: text }; });
      }).then(function (answer) {
        if (ticket !== asked) { return; }  // a later preview is on its way
        if (answer.ok) {
          region.innerHTML = answer.text;
          fillEmailFrame(body);
        } else {
          region.textContent = "The preview could not be made (" + answer.text.replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").trim().slice(0, 200) + ")";
        }
      }).catch(function () {
        if (ticket === asked) { region.textContent = "The preview could not be made: the server did not answer."; }
      });
    }

    // An email is shown by its own answer in the sandboxed frame: a form, made here, posts the editor's
    // fields with the frame as its target (the answer carries the email's styles and no script can run).
    function fillEmailFrame(body) {
      var frame = region.querySelector("iframe[data-email-frame]");
      if (!frame) { return; }
      var poster = document.createElement("form");
      poster.method = "post";
      poster.action = frame.getAttribute("data-email-frame");
      poster.target = frame.name;
      poster.hidden = true;
      body.forEach(function (value, name) {
        var input = document.createElement("input");
        input.type = "hidden";
        input.name = name;
        input.value = value;
        poster.appendChild(input);
      });
      document.body.appendChild(poster);
      poster.submit();
      document.body.removeChild(poster);
    }

    function later() {
      window.clearTimeout(timer);
      timer = window.setTimeout(function () { preview(current); }, DELAY_MS);
    }

    form.addEventListener("input", function (event) {
      var step = event.target.closest("[data-step]");
      if (step) { current = Number(step.getAttribute("data-step")); }
      if (current === null) {
        var first = form.querySelector("[data-step]");
        current = first ? Number(first.getAttribute("data-step")) : null;
      }
      later();
    });
    // The first step shows at once, unless the page came with a preview of its own (its Preview button, without script).
    var first = form.querySelector("[data-step]");
    if (first && !region.querySelector("[data-preview-step], [data-preview-error]")) {
      current = Number(first.getAttribute("data-step"));
      preview(current);
    }
    // Rows (a step's conditions, an email's blocks) are added from the page's row templates and removed
    // in place, without asking the server. Added rows take the next number: the server reads gaps.
    form.addEventListener("click", function (event) {
      var add = event.target.closest("[data-add-row]");
      var remove = event.target.closest("[data-remove-row]");
      var addGroup = event.target.closest("[data-add-group]");
      if (addGroup) {
        // A condition group with one empty row, numbered after the step's groups (its own "Add condition" works at once).
        var groups = document.getElementById(addGroup.getAttribute("data-add-group"));
        var groupTemplate = document.getElementById("condition-group-template");
        if (!groups || !groupTemplate) { return; }
        event.preventDefault();
        var step = groups.getAttribute("data-step");
        var group = Number(groups.getAttribute("data-next-group"));
        groups.setAttribute("data-next-group", String(group + 1));
        var groupHolder = document.createElement("div");
        groupHolder.innerHTML = groupTemplate.innerHTML
          .split("__STEPNUMBER__").join(String(Number(step) + 1))
          .split("__GROUPNUMBER__").join(String(group + 1))
          .split("__STEP__").join(step)
          .split("__GROUP__").join(String(group));
        var addedGroup = groupHolder.firstElementChild;
        groups.appendChild(addedGroup);
        addedGroup.querySelector("input[type=text]").focus();
      } else if (add) {
        var list = document.getElementById(add.getAttribute("data-add-row"));
        var template = list && document.getElementById(list.getAttribute("data-row-template"));
        if (!template) { return; }
        event.preventDefault();
        var row = Number(list.getAttribute("data-next-row"));
        list.setAttribute("data-next-row", String(row + 1));
        var markup = template.innerHTML
          .split("__STEP__").join(list.getAttribute("data-step"))
          .split("__GROUP__").join(list.getAttribute("data-group") || "")
          .split("__ROW__").join(String(row));
        var holder = document.createElement("div");
        holder.innerHTML = markup;
        var added = holder.firstElementChild;
        list.querySelector(".row-list").appendChild(added);
        added.querySelector("input[type=text], textarea").focus();
      } else if (remove) {
        event.preventDefault();
        var gone = remove.closest(remove.getAttribute("data-remove-row"));
        var owner = gone.closest("[data-row-owner]");
        gone.parentNode.removeChild(gone);
        var next = owner && owner.querySelector("[data-add-row]");
        if (next) { next.focus(); }
        form.dispatchEvent(new Event("input"));  // the preview follows (an email's block gone)
      }
    });
    form.querySelectorAll("[data-preview-button]").forEach(function (button) {
      button.addEventListener("click", function (event) {
        event.preventDefault();
        current = Number(button.getAttribute("data-preview-button"));
        window.clearTimeout(timer);
        preview(current);
      });
    });
  });
})();
