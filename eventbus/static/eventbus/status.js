// The status page's auto-refresh toggle: when checked (remembered in this browser), the page
// reloads every data-seconds seconds, keeping its filters (the query string).
(function () {
  "use strict";
  var KEY = "deskcomm.status.autoRefresh";
  var timer = null;

  function schedule(box) {
    window.clearTimeout(timer);
    if (box.checked) {
      timer = window.setTimeout(function () { window.location.reload(); },
                                Number(box.dataset.seconds || 30) * 1000);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("dc-auto-refresh");
    if (!box) { return; }
    box.checked = window.localStorage.getItem(KEY) === "on";
    box.addEventListener("change", function () {
      window.localStorage.setItem(KEY, box.checked ? "on" : "off");
      schedule(box);
    });
    schedule(box);
  });
}());
