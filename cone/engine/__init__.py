"""The engine: cone's only importer of xmtp-bindings (libxmtp 1.10).

`_client` constructs real libxmtp clients; the rest of the package drives them.
"""

import os

# libxmtp logs through Rust's tracing to stderr; keep it to errors unless the
# operator asks for more with RUST_LOG.
os.environ.setdefault("RUST_LOG", "error")
