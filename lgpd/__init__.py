"""LGPD data-subject requests (export and redaction). Built by the LGPD issue."""
