"""Model sessions (onnxruntime), execution providers, precision, batching and out-of-memory back-off."""

from engine.runtime.providers import ProviderError, SessionReport
from engine.runtime.sessions import ModelSession, Runtime

__all__ = ["ModelSession", "ProviderError", "Runtime", "SessionReport"]
