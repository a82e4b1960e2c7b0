"""The one fake ChatModel of the suite, a deterministic :class:`rag.llm.base.ChatModel`.

It is a real implementation of the interface (it satisfies the runtime-checkable Protocol, which
a test checks), not a mock: it answers every call with a fixed text or with what a function of the
messages and prompt version returns, and records each call so tests can check what was asked.
"""

from __future__ import annotations

from collections.abc import Callable

from rag.llm.base import Completion

#: ``reply(messages, prompt_version) -> text``.
ReplyFn = Callable[[list[dict], str], str]


class FakeChatModel:
    """A ChatModel that answers ``reply`` (a fixed text, or a function of the request).

    Attributes:
        calls: one dict per call: ``messages``, ``temperature``, ``max_tokens``, ``seed``,
            ``json_mode``, ``prompt_version``.
    """

    def __init__(self, reply: str | ReplyFn, *, name: str = "scripted") -> None:
        self.reply = reply
        self.name = name
        self.calls: list[dict] = []

    def complete(
        self,
        messages,
        *,
        temperature=0.0,
        max_tokens=256,
        stop=None,
        seed=0,
        json_mode=False,
        prompt_version="v1",
        check=None,
    ) -> Completion:
        self.calls.append(
            {
                "messages": messages,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "seed": seed,
                "json_mode": json_mode,
                "prompt_version": prompt_version,
            }
        )
        text = self.reply if isinstance(self.reply, str) else self.reply(messages, prompt_version)
        if check is not None:
            check(text)  # as the cached model does: a reply its parser refuses raises
        return Completion(text, self.name, "fake", 10, 10, 0.0, 0.0, False)
