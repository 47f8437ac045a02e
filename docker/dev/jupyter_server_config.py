"""JupyterLab settings of the envcheck `jupyter` image: token auth always on, no passwords."""

c = get_config()  # type: ignore[name-defined]  # noqa: F821  (provided by traitlets at load time)

c.ServerApp.ip = "0.0.0.0"  # the container's port is published on 127.0.0.1 by compose
c.ServerApp.port = 8888
c.ServerApp.open_browser = False
c.ServerApp.root_dir = "/workspace"
c.ServerApp.allow_root = False
# The token comes from JUPYTER_TOKEN (set by the entrypoint, never empty). No password login at all.
c.PasswordIdentityProvider.hashed_password = ""
c.PasswordIdentityProvider.allow_password_change = False
c.ServerApp.terminals_enabled = True
