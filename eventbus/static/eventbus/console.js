/* Operations console: copy buttons next to short ids (the full id is in data-copy). */
document.addEventListener("click", function (event) {
  var button = event.target.closest("button.dc-copy");
  if (!button) { return; }
  event.preventDefault();
  var text = button.getAttribute("data-copy");
  var done = function () {
    button.textContent = "copied";
    setTimeout(function () { button.textContent = "copy"; }, 1500);
  };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(text).then(done);
    return;
  }
  var area = document.createElement("textarea");
  area.value = text;
  document.body.appendChild(area);
  area.select();
  document.execCommand("copy");
  area.remove();
  done();
});
