"""Scheduling policies, one module (or small package) each; the registry names them."""
