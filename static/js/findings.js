// /findings/: a link to one finding (#finding-<id>, from a workload's "Why" block or a findings e-mail) opens the
// group it sits in, so the finding is shown, not folded. Plain script: the page works without it (groups open by
// hand; a page with one group shows it open).
(function () {
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (!target) return;
    var group = target.closest("details");
    if (group && !group.open) {
      group.open = true;
      target.scrollIntoView();
    }
  }
  window.addEventListener("hashchange", reveal);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", reveal);
  else reveal();
})();
