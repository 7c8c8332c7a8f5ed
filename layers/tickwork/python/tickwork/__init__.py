"""tickwork: the shared package shipped as a Lambda layer."""
