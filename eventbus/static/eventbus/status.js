// The status page's scripts (templates/admin/eventbus/status*.html), no library:
// - the charts update in place: every data-live-seconds the section fetches its JSON
//   (eventbus_ops:status-charts, with the range and filters of the page) and redraws each SVG
//   from the geometry the server computed (eventbus/admin/charts.py as_json); the range switch
//   (1 h, 24 h, 7 d) and the filters do the same at once and keep the address in step;
// - the tables' reload toggle: when checked (remembered in this browser), the page reloads every
//   data-seconds seconds, keeping its filters (the query string).
(function () {
  "use strict";
  var KEY = "deskcomm.status.autoRefresh";
  var SVG = "http://www.w3.org/2000/svg";
  var timer = null;

  function schedule(box) {
    window.clearTimeout(timer);
    if (box.checked) {
      timer = window.setTimeout(function () { window.location.reload(); },
                                Number(box.dataset.seconds || 30) * 1000);
    }
  }

  function reloadToggle() {
    var box = document.getElementById("dc-auto-refresh");
    if (!box) { return; }
    box.checked = window.localStorage.getItem(KEY) === "on";
    box.addEventListener("change", function () {
      window.localStorage.setItem(KEY, box.checked ? "on" : "off");
      schedule(box);
    });
    schedule(box);
  }

  // -- drawing ------------------------------------------------------------------------------

  function el(name, attrs, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, String(attrs[key])); });
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function fixed(n) { return Number(n).toFixed(1); }

  // The same elements as templates/admin/eventbus/includes/line_chart.svg.html.
  function draw(svg, chart) {
    var box = chart.box, left = box[2], right = box[4], bottom = box[5];
    var yAxis = el("g", {"class": "dc-axis dc-axis-y"});
    chart.y_ticks.forEach(function (tick) {
      yAxis.appendChild(el("line", {x1: left, y1: fixed(tick[0]), x2: right, y2: fixed(tick[0])}));
      yAxis.appendChild(el("text", {x: left - 6, y: fixed(tick[0]), "text-anchor": "end",
                                    "dominant-baseline": "middle"}, tick[1]));
    });
    var xAxis = el("g", {"class": "dc-axis dc-axis-x"});
    chart.x_ticks.forEach(function (tick) {
      xAxis.appendChild(el("line", {x1: fixed(tick[0]), y1: bottom, x2: fixed(tick[0]),
                                    y2: bottom + 4}));
      xAxis.appendChild(el("text", {x: fixed(tick[0]), y: bottom + 16,
                                    "text-anchor": "middle"}, tick[1]));
    });
    var parts = [yAxis, xAxis];
    chart.lines.forEach(function (line) {
      var group = el("g", {"class": "dc-series dc-series-" + line.name, "data-series": line.name});
      group.appendChild(el("polyline", {points: line.path, fill: "none"}));
      line.marks.forEach(function (mark) {
        var circle = el("circle", {cx: fixed(mark[0]), cy: fixed(mark[1]), r: "2.5",
                                   "data-value": mark[2]});
        circle.appendChild(el("title", {}, mark[3]));
        group.appendChild(circle);
      });
      parts.push(group);
    });
    var legend = el("g", {"class": "dc-legend"});
    chart.legend.forEach(function (item) {
      legend.appendChild(el("rect", {"class": "dc-series-" + item[1], x: item[0], y: 8,
                                     width: 14, height: 4}));
      legend.appendChild(el("text", {x: item[0] + 20, y: 10, "dominant-baseline": "middle"},
                            item[2]));
    });
    parts.push(legend);
    svg.replaceChildren.apply(svg, parts);
    svg.setAttribute("aria-label", chart.title);
  }

  // -- the live section ---------------------------------------------------------------------

  function liveCharts(section) {
    var form = section.querySelector("form.dc-chart-filters");
    var status = document.getElementById("dc-charts-live");
    var every = Number(section.dataset.liveSeconds || 5) * 1000;
    var pending = null;
    var timer = null;

    function params() {
      var query = new URLSearchParams();
      query.set("range", section.dataset.range);
      ["consumer", "organization"].forEach(function (name) {
        var field = form.elements.namedItem(name);
        if (field && field.value) { query.set(name, field.value); }
      });
      return query;
    }

    function say(text, bad) {
      status.textContent = text;
      status.classList.toggle("dc-bad", Boolean(bad));
    }

    function apply(data) {
      data.charts.forEach(function (chart) {
        var svg = document.getElementById("chart-" + chart.name);
        var title = section.querySelector("[data-chart-title='" + chart.name + "']");
        if (svg) { draw(svg, chart); svg.dataset.range = data.range; }
        if (title) { title.textContent = chart.title; }
      });
      section.dataset.updates = String(Number(section.dataset.updates || 0) + 1);
      section.dataset.asOf = data.as_of;
      say("live · updated " + data.as_of_text.slice(11));
    }

    function refresh() {
      window.clearTimeout(timer);
      if (pending) { pending.abort(); }
      pending = new AbortController();
      var url = section.dataset.liveUrl + "?" + params().toString();
      fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"},
                  signal: pending.signal})
        .then(function (response) {
          if (response.redirected || !response.ok) {
            throw new Error(response.redirected ? "signed out" : "HTTP " + response.status);
          }
          return response.json();
        })
        .then(function (data) { apply(data); next(); })
        .catch(function (error) {
          if (error.name === "AbortError") { return; }
          say("live updates paused (" + error.message + "): reload the page", true);
        });
    }

    function next() {
      window.clearTimeout(timer);
      timer = window.setTimeout(function () {
        if (document.hidden) { next(); } else { refresh(); }
      }, every);
    }

    function keepAddress() {
      var query = new URLSearchParams(window.location.search);
      params().forEach(function (value, name) { query.set(name, value); });
      ["consumer", "organization"].forEach(function (name) {
        if (!params().has(name)) { query.delete(name); }
      });
      window.history.replaceState(null, "", "?" + query.toString());
    }

    section.querySelectorAll("a.dc-range").forEach(function (link) {
      link.addEventListener("click", function (event) {
        event.preventDefault();
        section.dataset.range = link.dataset.range;
        form.elements.namedItem("range").value = link.dataset.range;
        section.querySelectorAll("a.dc-range").forEach(function (other) {
          var on = other === link;
          other.classList.toggle("dc-range-on", on);
          if (on) { other.setAttribute("aria-current", "true"); }
          else { other.removeAttribute("aria-current"); }
        });
        keepAddress();
        refresh();
      });
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      keepAddress();
      refresh();
    });
    next();
  }

  document.addEventListener("DOMContentLoaded", function () {
    reloadToggle();
    var section = document.getElementById("status-charts");
    if (section && section.dataset.liveUrl && window.fetch) { liveCharts(section); }
  });
}());
