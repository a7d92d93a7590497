/*
 * Charts of the run, comparison, campaign, host and host-test pages. Every chart is a canvas
 * that says what it is: data-chart (its name), data-draw (which drawer below draws it) and
 * data-sources (the JSON documents it reads, by name: {"timeline": url, ...}); the pages
 * declare them once, in campaigns/web/chart_registry.py. Each section marked data-charts
 * fetches every document its canvases name once, then hands each canvas its own: nothing is
 * matched by position. The server aggregates (nothing here walks transfers); every time chart
 * draws the events of the hosts and backends involved as vertical lines
 * (chartjs-plugin-annotation). A section whose documents say "live" asks again every 5 s, and
 * stops once the server says the run ended; a [data-chart-param] control of the section (the
 * history's figure) is sent with every request and redraws the section when it changes.
 *
 * Loaded with "defer" after the vendored Chart.js, its date adapter and the annotation plugin.
 */
(function () {
  "use strict";

  var PALETTE = ["#3b7dd8", "#e0803a", "#3aa876", "#c94f7c", "#8a6fd1", "#b8a03a", "#4fb3c9", "#9a6a4a"];
  var POLL_MS = 5000;

  function colour(i) { return PALETTE[i % PALETTE.length]; }

  /* ---- Units ---------------------------------------------------------------------------- */

  var PREFIXES = ["", "k", "M", "G", "T", "P"];
  function si(value, unit) {
    if (value === null || value === undefined || isNaN(value)) return "–";
    var i = 0, v = Math.abs(value);
    while (v >= 1000 && i < PREFIXES.length - 1) { v /= 1000; i++; }
    var shown = v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
    return (value < 0 ? "-" : "") + shown + " " + PREFIXES[i] + unit;
  }
  function formatter(unit) {
    if (unit === "%") return function (v) { return Number(Number(v).toPrecision(3)) + " %"; };
    if (!unit) return function (v) { return String(Number(Number(v).toPrecision(3))); };
    return function (v) { return si(v, unit); };
  }

  /* ---- Times: in the site's zone, 24-hour ---------------------------------------------- */

  /* The date adapter formats in the browser's zone; every time on the pages is in the site's
     (settings.TIME_ZONE, named on <body data-time-zone>), so the time axes and tooltips are
     formatted here, in that zone, and their title names it: a chart reads the same on any
     machine, and the PDF the same as the page. */
  var DAY_MS = 86400000;
  var FIELDS = { yyyy: "year", MM: "month", dd: "day", HH: "hour", mm: "minute", ss: "second" };
  // Finer than a day, a tick's date goes without saying unless the axis spans more than a day.
  var TICK_PATTERN = { millisecond: "HH:mm:ss", second: "HH:mm:ss", minute: "HH:mm", hour: "HH:mm", day: "MM-dd",
    week: "MM-dd", month: "yyyy-MM", quarter: "yyyy-MM", year: "yyyy" };
  var UNIT_MS = { millisecond: 1, second: 1000, minute: 60000, hour: 3600000 };

  var zone = "UTC", wallClock;
  function siteZone() { return zone; }

  function clockOf(name) {
    return new Intl.DateTimeFormat("en-GB", { timeZone: name, hourCycle: "h23", year: "numeric", month: "2-digit",
      day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  function startClock() {
    zone = document.body.getAttribute("data-time-zone") || "UTC";
    try { wallClock = clockOf(zone); } catch (err) {
      // A zone the server knows but this browser does not: UTC, which the axes then name.
      console.error(err);
      zone = "UTC";
      wallClock = clockOf(zone);
    }
  }

  function wallParts(ms) {
    var parts = {};
    wallClock.formatToParts(new Date(ms)).forEach(function (p) { parts[p.type] = p.value; });
    return parts;
  }

  /* `ms` in the site's zone after `pattern`, of the tokens of FIELDS ("yyyy-MM-dd HH:mm:ss"). */
  function inZone(ms, pattern) {
    var parts = wallParts(ms);
    return pattern.replace(/yyyy|MM|dd|HH|mm|ss/g, function (token) { return parts[FIELDS[token]]; });
  }

  /* How far the site's clock is ahead of UTC at `ms`. */
  function zoneOffset(ms) {
    var p = wallParts(ms);
    return Date.UTC(+p.year, p.month - 1, +p.day, +p.hour, +p.minute, +p.second) - Math.floor(ms / 1000) * 1000;
  }

  /* Chart.js puts ticks on the browser's hours and midnights: moved onto the site's, so a day's
     tick is at the site's midnight (the shift is a whole number of a finer unit's steps unless
     the zones differ by a fraction of it, as India's half hour does). */
  function alignTicks(axis) {
    var step = UNIT_MS[axis._unit];
    axis.ticks = axis.ticks.map(function (tick) {
      var shift = zoneOffset(tick.value) - (-new Date(tick.value).getTimezoneOffset() * 60000);
      if (step) shift = shift % step;
      return { value: tick.value - shift, major: tick.major };
    }).filter(function (tick) { return tick.value >= axis.min && tick.value <= axis.max; });
  }

  // Steps finer than a day a time axis is ticked at, in seconds: the ticks land on round times
  // of the site's clock (14:05, 14:10), not every 38 s from wherever the axis starts.
  var ROUND_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200];

  function roundStep(axis) {
    var span = (axis.max - axis.min) / 1000, most = axis.options.ticks.maxTicksLimit;
    return ROUND_STEPS.filter(function (step) { return span / step <= most; })[0];
  }

  function onRoundTimes(axis) {
    var step = UNIT_MS[axis._unit] && roundStep(axis);
    if (!step) return;
    axis.ticks = axis.ticks.filter(function (tick) {
      var p = wallParts(tick.value);
      return (p.hour * 3600 + p.minute * 60 + Number(p.second)) % step === 0;
    });
  }

  function siteTicks(axis) {
    alignTicks(axis);
    onRoundTimes(axis);
  }

  function tickLabel(axis, value) {
    var pattern = TICK_PATTERN[axis._unit] || "HH:mm:ss";
    if (UNIT_MS[axis._unit] && axis.max - axis.min > DAY_MS) pattern = "MM-dd " + pattern;
    return inZone(value, pattern);
  }

  function tooltipTime(items) { return items.length ? inZone(items[0].parsed.x, "yyyy-MM-dd HH:mm:ss") : ""; }

  /* ---- Annotations ---------------------------------------------------------------------- */

  /* Each event is a vertical line with its name at its foot, centred on the line and kept inside
     the plot (the plugin's placing, repeated here to know where each name lands). Names closer
     than their widths would be drawn over each other: each goes up to the lowest row where it
     clears the names already placed, and past the rows the plot has room for, it shows only while
     the pointer is on its line. */
  var EVENT_FONT = { size: 10, weight: "bold" };
  var LABEL_PADDING = 6, LABEL_GAP = 4, ROW_GAP = 3, MAX_ROWS = 3, HIT_TOLERANCE = 4;

  function eventFont() { return window.Chart.helpers.toFont(EVENT_FONT); }
  function rowHeight() { return eventFont().lineHeight + 2 * LABEL_PADDING + ROW_GAP; }

  function labelWidth(chart, text) {
    var ctx = chart.ctx;
    ctx.save();
    ctx.font = eventFont().string;
    var width = ctx.measureText(text).width + 2 * LABEL_PADDING;
    ctx.restore();
    return width;
  }

  function labelBox(chart, mark) {
    var area = chart.chartArea, width = labelWidth(chart, mark.text);
    var lo = area.left + LABEL_PADDING + width / 2, hi = area.right - LABEL_PADDING - width / 2;
    var centre = lo > hi ? (area.left + area.right) / 2 : Math.min(Math.max(chart.scales.x.getPixelForValue(mark.x), lo), hi);
    return { left: centre - width / 2, right: centre + width / 2 };
  }

  /* Each label's place: its row (0 at the foot), placed left to right, each in the lowest row
     whose last label ends before it starts; one with no row left is crowded, shown on hover in
     the row above the others. */
  function labelPlaces(chart, marks) {
    var room = Math.max(1, Math.min(MAX_ROWS, Math.floor(chart.chartArea.height / 2 / rowHeight())));
    var boxes = marks.map(function (m, i) { return Object.assign({ i: i }, labelBox(chart, m)); });
    boxes.sort(function (a, b) { return a.left - b.left; });
    var ends = [], places = [];
    boxes.forEach(function (box) {
      var row = 0;
      while (row < ends.length && ends[row] + LABEL_GAP > box.left) row++;
      places[box.i] = { row: Math.min(row, room), crowded: row >= room };
      if (row < room) ends[row] = box.right;
    });
    return places;
  }

  /* The places, worked out again only when the plot or its time range changed. */
  function placesOf(marks) {
    var key, places;
    return function (chart) {
      var a = chart.chartArea, x = chart.scales.x;
      var now = [a.left, a.right, a.top, a.bottom, x.min, x.max, window.Chart.defaults.font.family].join();
      if (now !== key) { key = now; places = labelPlaces(chart, marks); }
      return places;
    };
  }

  /* A crowded event's name while the pointer is on its line; the others are always shown. */
  function reveal(place, shown) {
    return function (ctx) {
      if (!place(ctx.chart).crowded || !ctx.element.label) return false;
      ctx.element.label.options.display = shown;
      return true;
    };
  }

  function eventLine(mark, place) {
    var warn = mark.disturbing;
    return {
      type: "line",
      xMin: mark.x,
      xMax: mark.x,
      borderColor: warn ? "#d97706" : "#64748b",
      borderWidth: warn ? 2 : 1,
      borderDash: warn ? [] : [4, 4],
      hitTolerance: HIT_TOLERANCE,
      enter: reveal(place, true),
      leave: reveal(place, false),
      label: {
        display: function (ctx) { return !place(ctx.chart).crowded; },
        content: mark.text,
        position: "start",
        yAdjust: function (ctx) { return -place(ctx.chart).row * rowHeight(); },
        font: EVENT_FONT,
        padding: LABEL_PADDING,
        backgroundColor: warn ? "rgba(217,119,6,0.85)" : "rgba(100,116,139,0.8)",
      },
    };
  }

  function annotations(events, origin) {
    var marks = (events || []).map(function (e) {
      return { x: origin === undefined ? e.time : (e.time - origin) / 1000, text: e.label + (e.host ? " · " + e.host : ""),
        disturbing: e.disturbing };
    });
    var places = placesOf(marks), out = {};
    marks.forEach(function (mark, i) {
      out["event" + i] = eventLine(mark, function (chart) { return places(chart)[i]; });
    });
    return out;
  }

  /* ---- Chart factories ------------------------------------------------------------------ */

  function timeAxis(min, max) {
    return {
      type: "time",
      min: min,
      max: max,
      title: { display: true, text: "time (" + siteZone() + ")" },
      time: { minUnit: "second" },
      afterBuildTicks: siteTicks,
      ticks: { maxRotation: 0, autoSkip: true, maxTicksLimit: 8, callback: function (value) { return tickLabel(this, value); } },
    };
  }

  function valueAxis(title, unit, extra) {
    var axis = { title: { display: true, text: title }, beginAtZero: true, ticks: { callback: formatter(unit) } };
    return Object.assign(axis, extra || {});
  }

  function makeChart(canvas, type, datasets, scales, events, origin) {
    var existing = canvas._chart;
    var callbacks = {
      label: function (ctx) {
        var unit = ctx.dataset.unit || "";
        var y = ctx.parsed.y;
        return ctx.dataset.label + ": " + formatter(unit)(y);
      },
    };
    if (scales.x && scales.x.type === "time") callbacks.title = tooltipTime;
    var options = {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      parsing: true,
      interaction: { mode: "nearest", intersect: false },
      scales: scales,
      plugins: {
        legend: { position: "bottom", labels: { boxWidth: 12 } },
        annotation: { annotations: annotations(events, origin) },
        tooltip: { callbacks: callbacks },
      },
    };
    if (existing) {
      existing.data.datasets = datasets;
      existing.options.scales = scales;
      existing.options.plugins.annotation.annotations = annotations(events, origin);
      existing.update("none");
      return existing;
    }
    canvas._chart = new window.Chart(canvas, { type: type, data: { datasets: datasets }, options: options });
    return canvas._chart;
  }

  function noData(canvas, text) {
    var box = canvas.parentElement;
    var note = box.querySelector(".chart-empty");
    if (!note) {
      note = document.createElement("p");
      note.className = "chart-empty muted";
      box.appendChild(note);
    }
    note.textContent = text;
  }

  function clearNoData(canvas) {
    var note = canvas.parentElement.querySelector(".chart-empty");
    if (note) note.remove();
  }

  function line(label, xs, ys, i, extra) {
    var points = [];
    for (var k = 0; k < xs.length; k++) points.push({ x: xs[k], y: ys[k] });
    return Object.assign(
      { label: label, data: points, borderColor: colour(i), backgroundColor: colour(i), pointRadius: points.length < 30 ? 2 : 0,
        borderWidth: 1.5, tension: 0.2 },
      extra || {}
    );
  }

  /* A downloaded report (campaigns/reports) carries the documents its charts read in
     <script type="application/json" id="chart-documents">, by URL: it is drawn from them by
     this same code, offline, and never fetches. */
  var embedded;
  function embeddedDocuments() {
    if (embedded === undefined) {
      var el = document.getElementById("chart-documents");
      embedded = el ? JSON.parse(el.textContent) : null;
    }
    return embedded;
  }

  function getJSON(url) {
    var docs = embeddedDocuments();
    if (docs) {
      return Object.prototype.hasOwnProperty.call(docs, url) ? Promise.resolve(docs[url])
        : Promise.reject(new Error(url + " is not in this report"));
    }
    return fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" }).then(function (r) {
      if (!r.ok) throw new Error(url + " answered " + r.status);
      return r.json();
    });
  }

  /* ---- A live timeline asked from the page's last point on ------------------------------ */

  /* A live time document the page already holds (its "times" and the lists aligned with them) is
     asked again with since= its last time and bucket= its width: the server sends the buckets
     from that time on, marked "since" (the last one again: a live bucket still fills), or the
     whole document when the width changed. Merged here into what the page holds. */
  function sinceUrl(url, held) {
    if (!held || !held.live || embeddedDocuments() || !Array.isArray(held.times) || !held.times.length) return url;
    return url + (url.indexOf("?") < 0 ? "?" : "&") + "since=" + encodeURIComponent(held.times[held.times.length - 1]) +
      "&bucket=" + encodeURIComponent(held.bucket_seconds);
  }

  function zeros(n) { var out = []; for (var i = 0; i < n; i++) out.push(0); return out; }

  function mergeSince(held, part) {
    if (!held || part.since === undefined) return part;
    var keep = 0;
    while (keep < held.times.length && held.times[keep] < part.since) keep++;
    var n = part.times.length, out = Object.assign({}, part, { times: held.times.slice(0, keep).concat(part.times) });
    delete out.since;
    Object.keys(part).forEach(function (key) {
      if (key === "times") return;
      var now = part[key], before = held[key];
      if (Array.isArray(now) && now.length === n) {
        out[key] = (Array.isArray(before) ? before.slice(0, keep) : zeros(keep)).concat(now);
      } else if (now && typeof now === "object" && !Array.isArray(now)) {
        // A list per door: a door new in this part had nothing before, one gone has nothing since.
        var merged = {}, names = Object.keys(before || {}).concat(Object.keys(now).filter(function (k) { return !(before || {})[k]; }));
        names.sort().forEach(function (name) {
          merged[name] = ((before || {})[name] || zeros(keep)).slice(0, keep).concat(now[name] || zeros(n));
        });
        out[key] = merged;
      }
    });
    return out;
  }

  /* ---- Labelled series: a daemon's CPU, each disk, each log pattern -------------------- */

  /* Datasets of a canvas asking for data-labelled="metric[,metric]" from a {metric: {name: points}}
     map. data-limit names each series' ceiling, drawn dashed: a daemon's allowed cores
     (proc.cpus_allowed) or its cgroup quota (proc.cpu_quota_cores, which wins where set) at
     ×100 %, the CPU it may use; any other metric (a filesystem's size) as it is. */
  function labelledSets(c, labelled) {
    var metrics = c.getAttribute("data-labelled").split(",");
    var unit = c.getAttribute("data-unit") || "";
    var sets = [], i = 0;
    metrics.forEach(function (metric) {
      var byName = (labelled || {})[metric] || {};
      var suffix = metrics.length > 1 ? " " + metric.split(".").pop().replace(/_bps$/, "") : "";
      Object.keys(byName).forEach(function (name) {
        var points = byName[name].map(function (p) { return { x: p[0], y: p[1] }; });
        sets.push({ label: name + suffix, data: points, borderColor: colour(i), backgroundColor: colour(i),
          pointRadius: points.length < 30 ? 3 : 0, borderWidth: 1.5, unit: unit });
        i++;
      });
    });
    var limit = c.getAttribute("data-limit");
    if (limit && sets.length) {
      var cpu = limit === "proc.cpus_allowed";
      var quota = cpu ? (labelled || {})["proc.cpu_quota_cores"] || {} : {}, allowed = (labelled || {})[limit] || {};
      Object.keys(allowed).forEach(function (name) {
        var source = quota[name] || allowed[name];
        var last = source[source.length - 1][1];
        var label = !cpu ? name + " size" : name + " may use (" + last + (quota[name] ? " core quota)" : " cores)");
        sets.push({ label: label,
          data: source.map(function (p) { return { x: p[0], y: cpu ? p[1] * 100 : p[1] }; }),
          borderColor: "#94a3b8", backgroundColor: "#94a3b8", borderDash: [6, 4], pointRadius: 0, borderWidth: 1,
          unit: cpu ? "%" : unit });
      });
    }
    return sets;
  }


  /* ---- Run page ------------------------------------------------------------------------- */

  function eventsOf(docs) { return docs.events ? docs.events.events : []; }

  function drawThroughput(c, docs) {
    var tl = docs.timeline;
    if (!tl.times.length) { noData(c, "No copy has finished yet."); return; }
    clearNoData(c);
    var sets = [], i = 0;
    Object.keys(tl.doors).forEach(function (name) {
      sets.push(line("door " + name, tl.times, tl.doors[name], i++, { unit: "B/s" }));
    });
    sets.push(line("total", tl.times, tl.total, i++, { unit: "B/s", borderWidth: 2.5, borderColor: "#6b7280", backgroundColor: "#6b7280" }));
    sets.push(line("rolling mean (" + tl.rolling_buckets + " × " + tl.bucket_seconds + " s)", tl.times, tl.rolling, i++,
      { unit: "B/s", borderDash: [6, 3], borderWidth: 2 }));
    makeChart(c, "line", sets, { x: timeAxis(), y: valueAxis("throughput (bytes/s)", "B/s") }, eventsOf(docs));
  }

  function drawInFlight(c, docs) {
    var tl = docs.timeline;
    if (!tl.times.length) { noData(c, "No copy has finished yet."); return; }
    clearNoData(c);
    var fails = line("failures per " + tl.bucket_seconds + " s", tl.times, tl.failures, 3, { type: "bar", yAxisID: "y2", unit: "" });
    makeChart(c, "line", [line("copies in flight", tl.times, tl.active, 0, { unit: "", fill: true, backgroundColor: "rgba(59,125,216,0.15)" }), fails],
      { x: timeAxis(), y: valueAxis("copies in flight (mean)", ""), y2: valueAxis("failures", "", { position: "right", grid: { drawOnChartArea: false } }) },
      eventsOf(docs));
  }

  /* A step is drawn at the concurrency it achieved (its mean in flight), its target kept for the
     axis ticks and the tooltip: a step of 4 that ran at 1.48 sits at 1.48, labelled "target ×4". */
  function stepPoints(data) {
    return data.steps.filter(function (s) { return s.throughput_bps; }).map(function (s) {
      var achieved = s.achieved_mean === null || s.achieved_mean === undefined ? s.concurrency : s.achieved_mean;
      return { x: achieved, y: s.throughput_bps, target: s.concurrency };
    });
  }

  function targetsOf(points) { return points.map(function (p) { return p.target === undefined ? p.x : p.target; }); }

  /* The tooltip's line under a step's throughput: the target it was asked for and what it ran at. */
  function stepTooltip(chart) {
    chart.options.plugins.tooltip.callbacks.afterLabel = function (ctx) {
      var p = ctx.raw;
      if (!p || p.target === undefined || p.target === null) return "";
      return "target ×" + p.target + ", ran at " + Number(p.x).toFixed(2) + " in flight";
    };
    chart.update("none");
    return chart;
  }

  /* Throughput against concurrency; in a sweep over more than concurrency, one line per setting. */
  function drawSteps(c, docs) {
    var data = docs.steps, points = stepPoints(data);
    if (!points.length) { noData(c, "No step has a throughput yet."); return; }
    clearNoData(c);
    var axis = concurrencyAxis(targetsOf(points));
    if (!data.axes || !data.axes.length) {
      stepTooltip(makeChart(c, "line", [{ label: "throughput per step", data: points, borderColor: colour(0), backgroundColor: colour(0), pointRadius: 4, unit: "B/s" }],
        { x: axis, y: valueAxis("throughput (bytes/s)", "B/s") }, []));
      return;
    }
    stepTooltip(makeChart(c, "line", sweepLines(data.by.concurrency), { x: axis, y: valueAxis("throughput (bytes/s)", "B/s") }, []));
  }

  /* The same steps against the first swept knob (data-axis), one line per concurrency. */
  function drawStepsByAxis(c, docs) {
    var data = docs.steps;
    if (!stepPoints(data).length) { noData(c, "No step has a throughput yet."); return; }
    clearNoData(c);
    var name = c.getAttribute("data-axis"), byAxis = (data.by || {})[name] || [];
    var numeric = byAxis.every(function (l) { return l.points.every(function (p) { return typeof p.x === "number"; }); });
    // Sizes read in bytes units; file sizes span decades (1 MB to 10 GB), so on a log scale.
    var sized = name === "file_size" || name === "tcp_buffer_size";
    var x = numeric ? { type: name === "file_size" ? "logarithmic" : "linear", title: { display: true, text: c.getAttribute("data-axis-label") },
        ticks: sized ? { callback: formatter("B") } : {} }
      : { type: "category", labels: uniqueX(byAxis), title: { display: true, text: c.getAttribute("data-axis-label") } };
    makeChart(c, "line", sweepLines(byAxis), { x: x, y: valueAxis("throughput (bytes/s)", "B/s") }, []);
  }

  function sweepLines(lines) {
    return lines.map(function (l, i) {
      return { label: l.label, data: l.points.map(function (p) { return { x: p.x, y: p.y, target: p.target }; }),
        borderColor: colour(i), backgroundColor: colour(i), pointRadius: 4, unit: "B/s" };
    });
  }

  function uniqueX(lines) {
    var seen = [];
    lines.forEach(function (l) { l.points.forEach(function (p) { if (seen.indexOf(p.x) < 0) seen.push(p.x); }); });
    return seen;
  }

  function drawScatter(c, docs) {
    var sc = docs.scatter;
    var note = c.closest("figure").querySelector("[data-chart-note]");
    if (note) note.textContent = "one successful copy in " + sc.sampled_every + " (" + sc.points.length + " points)";
    if (!sc.points.length) { noData(c, "No successful copy yet."); return; }
    clearNoData(c);
    makeChart(c, "scatter", [{ label: "copies", data: sc.points, borderColor: colour(2), backgroundColor: colour(2), pointRadius: 2, unit: "s" }],
      { x: { type: "linear", title: { display: true, text: "file size (bytes)" }, ticks: { callback: formatter("B") } },
        y: valueAxis("duration (s)", "s") }, []);
  }

  function drawErrors(c, docs) {
    var errors = docs.errors.errors;
    var list = c.closest("figure").querySelector("#error-categories");
    var tpl = list ? list.getAttribute("data-errors-url") : "";
    if (list) {
      list.replaceChildren();
      errors.forEach(function (e) {
        var b = document.createElement("button");
        b.type = "button";
        b.className = "btn btn-small";
        b.textContent = e.category + " (" + e.count + ")";
        b.setAttribute("data-category", e.category);
        b.addEventListener("click", function () {
          window.htmx.ajax("GET", tpl.replace("CATEGORY", e.category), { target: "#error-messages", swap: "innerHTML" });
        });
        list.appendChild(b);
      });
    }
    if (!errors.length) { noData(c, "No failure."); return; }
    clearNoData(c);
    makeChart(c, "bar", [{ label: "failures", data: errors.map(function (e) { return { x: e.category, y: e.count }; }),
      backgroundColor: colour(3), unit: "" }],
      { x: { type: "category", title: { display: true, text: "error category" } }, y: valueAxis("failures (count)", "") }, []);
  }

  /* A door metric of the run's hosts (data-metric; "net" is received and sent), one line per host. */
  function drawDoorMetric(c, docs) {
    var hosts = docs.hosts, metric = c.getAttribute("data-metric"), unit = c.getAttribute("data-unit") || "";
    var m = hosts.metrics || {};
    var sets = [], i = 0;
    var wanted = metric === "net" ? [["net.rx_bps", "received"], ["net.tx_bps", "sent"]] : [[metric, ""]];
    wanted.forEach(function (w) {
      var byHost = m[w[0]] || {};
      Object.keys(byHost).forEach(function (host) {
        sets.push({ label: host + (w[1] ? " " + w[1] : ""), data: byHost[host].map(function (p) { return { x: p[0], y: p[1] }; }),
          borderColor: colour(i), backgroundColor: colour(i), pointRadius: 0, borderWidth: 1.5, unit: unit });
        i++;
      });
    });
    if (!sets.length) {
      noData(c, (hosts.hosts || []).length ? "No sample from the doors' collectors in this window." : c.getAttribute("data-no-host"));
      return;
    }
    clearNoData(c);
    var title = metric === "cpu.percent" ? "CPU busy (%)" : metric === "load1" ? "load average (1 min)" : "network (bytes/s)";
    makeChart(c, "line", sets, { x: timeAxis(), y: valueAxis(title, unit, metric === "cpu.percent" ? { max: 100 } : {}) }, eventsOf(docs));
  }

  /* A labelled series of the run's doors (a daemon's CPU, each disk, each log pattern). */
  function drawLabelled(c, docs) {
    var hosts = docs.hosts, sets = labelledSets(c, hosts.labelled);
    if (!sets.length) {
      noData(c, (hosts.hosts || []).length ? "No such sample from the doors' collectors in this window." : c.getAttribute("data-no-host"));
      return;
    }
    clearNoData(c);
    makeChart(c, "line", sets, { x: timeAxis(), y: valueAxis(c.getAttribute("data-title"), c.getAttribute("data-unit") || "") }, eventsOf(docs));
  }

  /* A concurrency axis ticked at the sweep's own concurrencies (1, 2, 4 … 128), logarithmic when
     they span a factor of 8 or more: Chart.js's own log ticks (1.10, 1.20, 1.50 …) name none of them. */
  function concurrencyAxis(values) {
    var seen = {}, ticks = [];
    values.forEach(function (v) { if (v > 0 && !seen[v]) { seen[v] = true; ticks.push(v); } });
    ticks.sort(function (a, b) { return a - b; });
    var log = ticks.length > 1 && ticks[ticks.length - 1] / ticks[0] >= 8;
    return {
      type: log ? "logarithmic" : "linear",
      title: { display: true, text: "concurrency (copies at once)" },
      // The range holds the targets as well as the points: a step of 4 that ran at 0.3 is drawn
      // at 0.3 with ×4 still on the axis. Ticks outside the data's own range had Chart.js squeeze
      // the plot into a sliver beside them.
      suggestedMin: ticks.length ? ticks[0] : undefined,
      suggestedMax: ticks.length ? ticks[ticks.length - 1] : undefined,
      afterBuildTicks: function (axis) {
        if (ticks.length) axis.ticks = ticks.map(function (v) { return { value: v }; });
      },
      ticks: { autoSkip: false, callback: function (value) { return "×" + value; } }
    };
  }

  /* An axis for a swept knob: numbers (sizes in bytes units, file sizes on a log scale) or names (modes). */
  function knobAxis(by) {
    var xs = [];
    by.lines.forEach(function (l) { l.points.forEach(function (p) { if (xs.indexOf(p.x) < 0) xs.push(p.x); }); });
    var title = { display: true, text: by.label };
    if (!xs.every(function (v) { return typeof v === "number"; })) return { type: "category", labels: xs, title: title };
    var sized = by.x === "file_size" || by.x === "tcp_buffer_size";
    return { type: by.x === "file_size" ? "logarithmic" : "linear", title: title, ticks: sized ? { callback: formatter("B") } : {} };
  }


  /* ---- Comparison page ------------------------------------------------------------------ */

  function compareLabel(r) { return r.label + (r.disturbed ? " (disturbed)" : ""); }

  function drawCompareSteps(c, docs) {
    var data = docs.compare;
    if (data.by && data.by.x !== "concurrency") {
      // The steps against another knob (streams, TCP buffer, file size, mode): the server's lines.
      var lines = data.by.lines.map(function (l, i) {
        return { label: l.label, data: l.points.map(function (p) { return { x: p.x, y: p.y }; }), borderColor: colour(i),
          backgroundColor: colour(i), pointRadius: 4, borderDash: l.disturbed ? [5, 4] : [], unit: "B/s" };
      });
      makeChart(c, "line", lines, { x: knobAxis(data.by), y: valueAxis("throughput (bytes/s)", "B/s") }, []);
      return;
    }
    var steps = [], concurrencies = [];
    data.runs.forEach(function (r, i) {
      steps.push({ label: compareLabel(r), data: r.steps, borderColor: colour(i), backgroundColor: colour(i), pointRadius: 4,
        borderDash: r.disturbed ? [5, 4] : [], unit: "B/s" });
      concurrencies = concurrencies.concat(targetsOf(r.steps));
    });
    stepTooltip(makeChart(c, "line", steps, { x: concurrencyAxis(concurrencies), y: valueAxis("throughput (bytes/s)", "B/s") }, []));
  }

  function drawCompareTime(c, docs) {
    var time = docs.compare.runs.map(function (r, i) {
      return { label: compareLabel(r), data: r.over_time, borderColor: colour(i), backgroundColor: colour(i), pointRadius: 0,
        borderWidth: 1.5, borderDash: r.disturbed ? [5, 4] : [], unit: "B/s" };
    });
    makeChart(c, "line", time, { x: { type: "linear", title: { display: true, text: "seconds since the run started" } },
      y: valueAxis("throughput (bytes/s)", "B/s") }, []);
  }

  /* ---- Host page ------------------------------------------------------------------------ */

  function drawHostLabelled(c, docs) {
    var data = docs.host, sets = labelledSets(c, data.labelled);
    if (!sets.length) { noData(c, "No sample in this window."); return; }
    clearNoData(c);
    var chart = makeChart(c, "line", sets, { x: timeAxis(data.start, data.end), y: valueAxis(c.getAttribute("data-title"), c.getAttribute("data-unit") || "") },
      data.events);
    highlight(chart, data.highlight);
  }

  function drawHostMetric(c, docs) {
    var data = docs.host, metrics = c.getAttribute("data-metric").split(","), unit = c.getAttribute("data-unit") || "";
    var sets = [];
    metrics.forEach(function (metric, i) {
      var byHost = (data.metrics || {})[metric] || {};
      Object.keys(byHost).forEach(function (host) {
        var points = byHost[host].map(function (p) { return { x: p[0], y: p[1] }; });
        // A few samples only (a collector just started): show them as dots.
        sets.push({ label: metric, data: points, borderColor: colour(i), backgroundColor: colour(i),
          pointRadius: points.length < 30 ? 3 : 0, borderWidth: 1.5, unit: unit });
      });
    });
    if (!sets.length) { noData(c, "No sample in this window."); return; }
    clearNoData(c);
    var chart = makeChart(c, "line", sets, { x: timeAxis(data.start, data.end), y: valueAxis(c.getAttribute("data-title"), unit) },
      data.events);
    highlight(chart, data.highlight);
  }

  /* ---- Host-test series: each result as a point, the rolling mean as a line -------------- */

  function drawHostTest(c, docs) {
    var data = docs.hosttest, sets = [], i = 0;
    Object.keys(data.series).forEach(function (name) {
      var s = data.series[name];
      var points = [], mean = [];
      data.index.forEach(function (x, k) {
        if (s.values[k] !== null) points.push({ x: x, y: s.values[k] });
        if (s.rolling[k] !== null) mean.push({ x: x, y: s.rolling[k] });
      });
      var cached = name === "read" ? data.cached : [];
      sets.push({ label: name, data: points, showLine: false, borderColor: colour(i), backgroundColor: colour(i), unit: "B/s",
        pointRadius: 3, pointStyle: points.map(function (p) { return cached[p.x - 1] ? "crossRot" : "circle"; }) });
      sets.push({ label: name + " rolling mean (" + data.window + ")", data: mean, borderColor: colour(i), backgroundColor: colour(i),
        pointRadius: 0, borderWidth: 2, unit: "B/s", rolling: true });
      i++;
    });
    if (!sets.length) { noData(c, "No result yet."); return; }
    clearNoData(c);
    makeChart(c, "line", sets, { x: { type: "linear", title: { display: true, text: "result" }, ticks: { precision: 0 } },
      y: valueAxis("throughput (bytes/s)", "B/s") }, []);
  }

  /* ---- Campaign history: each run's figure, the band it was judged against, the changes ---- */

  var STATUS_COLOUR = { regressed: "#dc2626", better: "#16a34a", within: "#3b7dd8" };

  /* The figure is the section's [data-chart-param][name=figure] choice; its options come with the data. */
  function drawHistory(canvas, docs, section) {
    var data = docs.history;
    var select = section.querySelector('[data-chart-param][name="figure"]');
    if (select) {
      var chosen = select.value;
      select.replaceChildren();
      data.figures.forEach(function (f) {
        var o = document.createElement("option");
        o.value = f.key; o.textContent = f.label; o.selected = f.key === chosen;
        select.appendChild(o);
      });
    }
    if (!data.points.length) { noData(canvas, "No ended run has this figure yet."); return; }
    clearNoData(canvas);
    var unit = data.unit === "fraction" ? "" : data.unit;
    var banded = data.points.filter(function (p) { return p.low !== null; });
    var picked = select && select.options[select.selectedIndex];
    var sets = [
      { label: "band low", data: banded.map(function (p) { return { x: p.x, y: p.low }; }), borderColor: "rgba(59,125,216,0.35)",
        backgroundColor: "rgba(59,125,216,0.12)", pointRadius: 0, borderWidth: 1, stepped: "middle", fill: false, unit: unit, band: true },
      { label: "band (what each run was judged against)", data: banded.map(function (p) { return { x: p.x, y: p.high }; }),
        borderColor: "rgba(59,125,216,0.35)", backgroundColor: "rgba(59,125,216,0.12)", pointRadius: 0, borderWidth: 1,
        stepped: "middle", fill: "-1", unit: unit, band: true },
      { label: "baseline median", data: banded.map(function (p) { return { x: p.x, y: p.median }; }), borderColor: "rgba(59,125,216,0.6)",
        borderDash: [4, 4], pointRadius: 0, borderWidth: 1, stepped: "middle", unit: unit, band: true },
      { label: picked ? picked.textContent : data.figure,
        data: data.points.map(function (p) { return { x: p.x, y: p.y, run: p }; }), unit: unit, borderColor: "#334155", borderWidth: 1.5,
        pointRadius: 5, pointHoverRadius: 7,
        pointStyle: data.points.map(function (p) { return p.counted ? "circle" : "triangle"; }),
        pointBackgroundColor: data.points.map(function (p) { return STATUS_COLOUR[p.figure_status] || "#94a3b8"; }),
        pointBorderColor: data.points.map(function (p) { return STATUS_COLOUR[p.figure_status] || "#94a3b8"; }) },
    ];
    var chart = makeChart(canvas, "line", sets, { x: timeAxis(), y: valueAxis(data.figure.replace(/_/g, " "), unit) }, data.events);
    chart.options.plugins.legend.labels.filter = function (item) { return item.text !== "band low"; };
    chart.options.plugins.tooltip.callbacks.afterLabel = function (ctx) {
      var p = ctx.raw && ctx.raw.run;
      return p ? ["run #" + p.run + " " + p.state + (p.disturbed ? ", disturbed" : ""), p.headline,
        (p.counted ? "counted in later baselines: " : "not counted in later baselines: ") + p.baseline_why] : "";
    };
    chart.options.onClick = function (evt, elements) {
      var hit = elements.filter(function (e) { return chart.data.datasets[e.datasetIndex].data[e.index].run; })[0];
      if (hit) window.location.href = chart.data.datasets[hit.datasetIndex].data[hit.index].run.url;
    };
    chart.update("none");
  }

  /* The window a link asked for (a verdict's step): shaded, with the margin around it unshaded. */
  function highlight(chart, span) {
    if (!span) return;
    chart.options.plugins.annotation.annotations.highlight = {
      type: "box", xMin: span[0], xMax: span[1], borderWidth: 0,
      backgroundColor: "rgba(37, 99, 235, 0.12)",
      label: { display: true, content: "the step asked for", position: "start", font: { size: 10 } }
    };
    chart.update("none");
  }


  /* ---- Drawing a section: each canvas by its data-draw, from the documents it names ------- */

  var DRAW = {
    "timeline": drawThroughput,
    "in-flight": drawInFlight,
    "steps": drawSteps,
    "steps-by-axis": drawStepsByAxis,
    "scatter": drawScatter,
    "errors": drawErrors,
    "door-metric": drawDoorMetric,
    "labelled": drawLabelled,
    "compare-steps": drawCompareSteps,
    "compare-time": drawCompareTime,
    "host-metric": drawHostMetric,
    "host-labelled": drawHostLabelled,
    "hosttest": drawHostTest,
    "history": drawHistory,
  };

  function sourcesOf(canvas) { return JSON.parse(canvas.getAttribute("data-sources") || "{}"); }

  function chartSection(section) {
    var canvases = Array.prototype.slice.call(section.querySelectorAll("canvas[data-chart]"));
    var params = Array.prototype.slice.call(section.querySelectorAll("[data-chart-param]"));
    // A live section (a run, a host test) keeps asking after a failed request; another says it once.
    var live = section.getAttribute("data-live") === "1";
    var held = {};  // each document as last drawn: a live timeline is then asked from its last point on
    function asked(url) {
      var query = params.map(function (p) { return encodeURIComponent(p.name) + "=" + encodeURIComponent(p.value); }).join("&");
      return query ? url + (url.indexOf("?") < 0 ? "?" : "&") + query : url;
    }
    /* A section with data-bundle (the run page) asks all its documents in one request, the
       timeline from its last point on; another asks each document by its own URL. */
    var bundle = section.getAttribute("data-bundle");
    function fetchAll(names, urls) {
      if (bundle && !embeddedDocuments()) {
        var url = sinceUrl(asked(bundle + "?names=" + names.map(encodeURIComponent).join(",")), held.timeline);
        return getJSON(url).then(function (got) { return names.map(function (name) { return got.docs[name]; }); });
      }
      return Promise.all(names.map(function (name) { return getJSON(sinceUrl(asked(urls[name]), held[name])); }));
    }
    function draw() {
      var urls = {};
      canvases.forEach(function (c) {
        var sources = sourcesOf(c);
        Object.keys(sources).forEach(function (name) { urls[name] = sources[name]; });
      });
      var names = Object.keys(urls);
      return fetchAll(names, urls).then(function (got) {
        var docs = {};
        names.forEach(function (name, i) { docs[name] = held[name] = mergeSince(held[name], got[i]); });
        canvases.forEach(function (c) {
          var drawer = DRAW[c.getAttribute("data-draw")], own = {};
          Object.keys(sourcesOf(c)).forEach(function (name) { own[name] = docs[name]; });
          // One chart that cannot be drawn leaves the others drawn.
          try {
            if (!drawer) throw new Error("no drawer " + c.getAttribute("data-draw") + " for chart " + c.getAttribute("data-chart"));
            drawer(c, own, section);
          } catch (err) { console.error(err); }
        });
        live = got.some(function (doc) { return doc.live; });
        return live;
      });
    }
    function cycle() {
      draw().then(function (live) {
        if (live) setTimeout(cycle, POLL_MS);
      }).catch(function (err) {
        console.error(err);
        if (live) setTimeout(cycle, POLL_MS * 2);
      });
    }
    params.forEach(function (p) {
      p.addEventListener("change", function () { held = {}; draw().catch(function (err) { console.error(err); }); });
    });
    cycle();
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!window.Chart) return;
    startClock();
    if (window.StorageOps) window.StorageOps.applyChartTheme();
    document.querySelectorAll("[data-charts]").forEach(chartSection);
  });
})();
