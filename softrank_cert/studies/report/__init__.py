"""The campaign report (``softrank report DIR``): a ``bracket`` campaign folder, or a plain folder
of certificate files, as one static HTML page.

What runs, in order (every bracket on the page is a kernel verdict of this run, never a number
read from a manifest or a file: docs/campaigns.md, "A report a person opens"):

1. :mod:`.folder` tells the two kinds of folder apart (:func:`.folder.folder_kind`). For a
   campaign it reads the manifest (``DIR/softrank-campaign.json``, bookkeeping only), sizes
   every certificate before reading any (:func:`.folder.plan`: a documented count and byte
   limit) and re-verifies each one with the public verification entry point of
   ``softrank-verify`` (:func:`.folder.verify_operators`); a certificate that does not verify,
   is about another operator or holds other tolerances is listed with its reason.  For a plain
   folder :mod:`.certificates` does the same for the ``*.json`` files directly in it, taking
   the names and the page's tolerances from the verified certificates and counting one
   certificate per operator;
2. :mod:`.summary` groups the verified brackets by the operator name without its last
   component (``minilm/apache2/w64``) and reads widths and layers from the names;
3. :mod:`.figures` draws the figures (upper/lower ratios per tolerance; certified rank against
   width per layer where the names carry several widths);
4. :mod:`.page` writes the HTML (escaped text, relative links to the certificates).
"""
