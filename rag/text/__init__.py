"""Text tools shared by every later stage: normalisation, sentences, tokenizers and chunking."""
