'use strict';
// The admin at a laptop's width (core/static/core/admin-layout.css), on every admin page.
{
    // Below 1600 px the navigation sidebar starts closed (it opens over the page there); the
    // toggle keeps whatever the user chose since. Runs before Django's nav_sidebar.js (deferred),
    // which reads the same key.
    const key = 'django.admin.navSidebarIsOpen';
    if (localStorage.getItem(key) === null && window.innerWidth < 1600) {
        localStorage.setItem(key, 'false');
    }

    // In a list, each long token of a cell (an id, a URL, a hash: 20+ characters without a
    // space) is put in a `.dc-clip` span holding the whole token in its tooltip: the CSS shows
    // what fits of it on one line with an ellipsis, so one long id cannot make a list wider
    // than the window. The page's HTML and text are unchanged.
    const LONG = /\S{20,}/g;
    const SKIP = '.dc-clip, pre, textarea, select, option, script';
    function clipLongTokens(cell) {
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        const found = [];
        while (walker.nextNode()) {
            const node = walker.currentNode;
            if (node.nodeValue.search(LONG) !== -1 && !node.parentElement.closest(SKIP)) {
                found.push(node);
            }
        }
        for (const node of found) {
            const text = node.nodeValue;
            const parts = document.createDocumentFragment();
            let end = 0;
            for (const match of text.matchAll(LONG)) {
                parts.append(text.slice(end, match.index));
                const clip = document.createElement('span');
                clip.className = 'dc-clip';
                clip.title = match[0];
                clip.textContent = match[0];
                parts.append(clip);
                end = match.index + match[0].length;
            }
            parts.append(text.slice(end));
            node.replaceWith(parts);
        }
    }
    document.addEventListener('DOMContentLoaded', function() {
        document.querySelectorAll('#result_list tbody td, #result_list tbody th')
            .forEach(clipLongTokens);
    });
}
