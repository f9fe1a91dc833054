"""Plan-module code generation (jinja2 templates)."""
