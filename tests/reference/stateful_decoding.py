"""tests/reference/stateful_decoding.py — the decoding loops the stateful float64 references
share (numpy_qwen3_5.Model, numpy_gemma4.Model). A subclass supplies new_state() and
step(tokens, state) → (logits [len(tokens), vocab], hidden), advancing the state."""
import numpy as np


class StatefulDecoding:
    def forward(self, tokens):
        """Logits and hidden states of every row of `tokens` from an empty state."""
        return self.step(tokens, self.new_state())

    def greedy(self, prompt, n):
        """n greedy tokens after `prompt`, and the logits row that followed each."""
        state = self.new_state()
        logits, _ = self.step(prompt, state)
        toks, rows = [], []
        nxt = int(np.argmax(logits[-1]))
        for _ in range(n):
            toks.append(nxt)
            logits, _ = self.step([nxt], state)
            rows.append(logits[-1])
            nxt = int(np.argmax(logits[-1]))
        return np.array(toks, dtype=np.int64), np.array(rows)

    def forced_decode(self, prompt, fed):
        """The logits row after each token of `fed`, decoded one by one after `prompt`."""
        state = self.new_state()
        self.step(prompt, state)
        return np.array([self.step([t], state)[0][-1] for t in fed])
