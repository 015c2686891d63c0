"""Variants -> build contexts: the Dockerfile and the files a build copies, from templates/.

    contexts.py      the Jinja2 renderer (StrictUndefined), mirrors and offline options, `render --check`
    apt.py           apt repositories beyond the OS's (keyrings, deb822) and apt mirrors
    companions.py    the Python packages an image installs beside torch
    reproducible.py  the one date every layer carries

May import: plan, kb, vendors, model, and the shared leaves. Rendering is pure: no engine, no registry.
"""
