"""chat_finalize.py — turns a train_chat.py run into the shipped models/nextn-tiny-chat:
copies the weights, config, generation config and tokenizer files, keeps the training log,
eval.json, the chat data statistics and the nextn measurements (chat_eval.py output for this
model and for the MiMo model), and writes the README model card from them. --earlier RUN...
names the earlier stages when RUN continued from them (train_chat.py --continue-from); their
logs and eval.json are kept as training/stageN_*.

    /usr/bin/python3 tools/train/chat_finalize.py --run RUN --chat tools/train/work/chat \
        --nextn-eval eval_chat.json --baseline-eval eval_mimo.json --out models/nextn-tiny-chat \
        --hardware "..." --command "..." --machine "..."
"""
import argparse
import json
import os
import shutil


def pct(a, b):
    return f"{a}/{b} ({100 * a / max(b, 1):.1f} %)"


def answers_table(a, title, srcs, L):
    cells = [pct(a[k]["pass"], a[k]["n"]) if k in a else "-" for k in srcs]
    L.append(f"| {title} | " + " | ".join(cells) + f" | **{pct(a['all']['pass'], a['all']['n'])}** |")


def render(ev, earlier, chat_stats, config, nev, base, hardware, command, machine):
    tr = ev["training"]
    L = []
    a = L.append
    a("# nextn-tiny-chat\n")
    a("A tiny **Qwen3.5-architecture** hybrid chat model (Gated DeltaNet + gated attention at the "
      "3:1 pattern, `(1+w)` norms, one MTP layer at `mtp.*`), in the exact Hugging Face layout "
      "nextn loads (`Qwen3_5ForCausalLM`), tuned on chat data built from Debian packages by "
      "nextn's pipeline (`tools/train/`). It answers short questions about shell commands, Python "
      "functions and dictionary words in a few sentences and ends its turn with `<|im_end|>`. It is a "
      "toy: answers often sound right and are wrong in the details.\n")
    a("## Architecture\n")
    kinds = config["layer_types"]
    a("| | |\n|---|---|")
    a("| architecture | `Qwen3_5ForCausalLM` (`model_type` `qwen3_5_text`), `mtp_num_hidden_layers` 1 |")
    a(f"| hidden / layers / FFN | {config['hidden_size']} / {config['num_hidden_layers']} "
      f"({kinds.count('linear_attention')} Gated DeltaNet + {kinds.count('full_attention')} gated attention, "
      f"full attention at layers {', '.join(str(i) for i, k in enumerate(kinds) if k == 'full_attention')}) / "
      f"{config['intermediate_size']} (SwiGLU) |")
    a(f"| gated attention | {config['num_attention_heads']} query heads, {config['num_key_value_heads']} KV heads, "
      f"head_dim {config['head_dim']}, q/k norm (1+w), output gate, partial RoPE "
      f"({config['rope_parameters']['partial_rotary_factor']} of head_dim, θ={config['rope_parameters']['rope_theta']:g}) |")
    a(f"| Gated DeltaNet | {config['linear_num_key_heads']} key / {config['linear_num_value_heads']} value heads, "
      f"dk = dv = {config['linear_key_head_dim']}, conv kernel {config['linear_conv_kernel_dim']} |")
    a(f"| vocab | {config['vocab_size']} (the byte-level BPE of models/nextn-tiny), tied embeddings |")
    a(f"| parameters | {tr['params']/1e6:.2f} M total: embedding {tr['params_embedding']/1e6:.2f} M, "
      f"MTP head {tr['params_mtp']/1e6:.2f} M |")
    a("| weights | BF16 `model.safetensors` |")
    a(f"| context | trained on {tr['seq']}-token windows |\n")
    a("MTP head (Qwen3.5 layout): row p consumes the backbone's post-final-norm hidden h_p and the "
      "embedding of x_{p+1} (zeroed at position 0, as nextn and vLLM do): "
      "`u = mtp.fc([pre_fc_norm_embedding(e); pre_fc_norm_hidden(h)])`, one gated-attention decoder "
      "layer, `mtp.norm`, the tied lm_head predicts x_{p+2}.\n")
    a("## Chat template\n")
    a("ChatML with Qwen3.5's `<think>` handling: the generation prompt is "
      "`<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n` (an empty reasoning block) unless "
      "`enable_thinking` is true (then `<think>\\n`; this model was never taught to reason). Earlier "
      "assistant turns are rendered the same way with any reasoning dropped, so each turn's prompt "
      "extends the previous rendering (the hybrid's prefix reuse across chat turns). Generation stops "
      "at `<|im_end|>` (or `<|endoftext|>`).\n")
    a("## Chat data\n")
    a("Built by `tools/train/chat_data.py` / `chat_sources.py` only from what Debian 12 packages "
      "install. Questions come from fixed phrasings per source; answers are the source text cut to "
      "at most 200 characters at a sentence end (this run: 330 for its first 172 steps, then the "
      "set was rebuilt with 200 because the model looped instead of ending long answers). An entry (source/subject) is held out when its "
      "SHA-1 falls in the lowest 4 %; held-out entries are never trained on and give the evaluation "
      "questions. Some conversations have a system message (25 %), a second turn (a follow-up "
      "about the same command's usage, or \"And what about X?\"), and a few are greetings "
      "(hand-written, 8 pairs). Loss on assistant answers and their `<|im_end|>` only.\n")
    a("| source | what | Debian package | licence | entries | train conversations | train tokens | held-out conversations |")
    a("|---|---|---|---|---|---|---|---|")
    what = {"devil": "word → Devil's Dictionary definition", "jargon": "term → Jargon File entry",
            "man": "\"what does command X do\" → NAME + DESCRIPTION (follow-up: SYNOPSIS)",
            "python": "\"what does f do\" → library reference entry",
            "python-faq": "FAQ question → first answer paragraph",
            "python-glossary": "term → glossary entry", "greeting": "hand-written greetings"}
    for k, s in chat_stats.items():
        if k.startswith("_"):
            continue
        t, v = s.get("train", {}), s.get("val", {})
        a(f"| {k} | {what.get(k, '')} | {s.get('package', '-')} | {s.get('license', '-')} | "
          f"{s.get('entries', '-')} | {t.get('conversations', 0)} | {t.get('tokens', 0)} | {v.get('conversations', 0)} |")
    n_pk = len(chat_stats.get("_man_packages", {}))
    a(f"\nMan pages: {n_pk} packages, at most 120 pages each; the package and licence (first "
      "`License:` of its copyright file) of every page's package are in `training/chat_sources.json`.\n")
    stages = [e["training"] for e in earlier] + [tr]
    tr1 = stages[0]   # the stage that started from the MiMo model, on the chat set itself
    a(f"Tokens: {tr1['train_tokens']/1e6:.2f} M training tokens, of which {tr1['answer_tokens']/1e6:.2f} M "
      "carry loss.\n")
    a("## Training\n")
    a(f"- Warm start (`tools/train/warm_start.py`): from models/nextn-tiny (the MiMo model) — embeddings, "
      f"the six MLPs and norms (w → w − 1 for the (1+w) form), the two attention layers' q/k/v/o from "
      f"MiMo layers 2 and 5 (biases dropped, output gate 0, o_proj × 2), and the MTP head (fc with its "
      f"column halves swapped); {tr1['warm_started_tensors']} tensors. New: the six Gated DeltaNet "
      "mixers (out_proj at 0, i.e. identity at start), two identity MLP layers, q/k norms, gates. "
      "Everything is then trained.")
    a(f"- Objective: masked cross-entropy of the backbone on x_(t+1) + {tr1['mtp_weight']} × masked "
      "cross-entropy of the MTP head on x_(t+2), assistant tokens only.")
    for i, t in enumerate(stages):
        own = t.get("self_answers")
        what = ("Training" if len(stages) == 1 else "First stage" if i == 0 else
                "Then only the MTP head, taught the backbone's own choices (`--distill-mtp`: "
                "cross-entropy against the backbone's softmax one row later; the backbone is frozen)"
                + (f", on the model's own T = 0 answers to {own['kept']} of {own['prompts']} training "
                   f"questions drawn at random (`chat_self.py`, {own['answer_tokens']/1e3:.0f} k answer "
                   f"tokens; {own['cut_at_max_tokens']} answers cut at {own['max_tokens']} tokens left out) "
                   "instead of the reference answers" if own else "")
                if t.get("distill_mtp") else "Then from that export")
        val = (earlier[i]["val_chat"] if i < len(earlier) else None)
        a(f"- {what}: AdamW (β 0.9/0.95, wd {t['wd']} on matrices), peak LR {t['lr']}, {t['warmup']} "
          f"warmup steps, cosine to {t['min_lr_frac']}× peak, grad clip 1.0, bf16 autocast, batch "
          f"{t['batch']} × {t['seq']} tokens (random windows of the packed conversation stream), seed "
          f"{t['seed']}; **{t['steps']} steps = {t['tokens_seen']/1e6:.2f} M tokens ({t['passes']:.2f} "
          f"passes over the chat set) in {t['minutes']:.1f} minutes**, {t['threads']} threads."
          + (f" Held-out after it: main loss {val['loss_main']:.3f}, MTP loss {val['loss_mtp']:.3f}, "
             f"MTP agreement {val['mtp_agreement']:.3f}." if val else ""))
    a(f"- Hardware: {hardware}. Machine: {machine}")
    a(f"- Command: `{command}`\n")
    a("Compute note: this is very little training: on the 2-core machine the run saw a small "
      "fraction of the compute that made models/nextn-tiny (7 minutes on an H200); the load column "
      "of the logs (`training/`) shows what else ran beside it. On a GPU: "
      "`tools/train/reproduce.sh --chat --device cuda --minutes 10`.\n")
    v = ev["val_chat"]
    a("## Losses (held-out conversations, assistant tokens)\n")
    a("| | value |\n|---|---|")
    a(f"| main head loss (nats/token) | {v['loss_main']:.3f} |")
    a(f"| MTP head loss on x_(t+2) | {v['loss_mtp']:.3f} |")
    a(f"| main head top-1 accuracy | {v['acc_main']:.3f} |")
    a(f"| MTP argmax = backbone argmax (teacher-forced) | {v['mtp_agreement']:.3f} |")
    a(f"| answer tokens | {v['answer_tokens']} |\n")
    if ev.get("val_history"):
        a(("Quick validation during training" if not earlier else "Quick validation during the last stage")
          + " (the first `--val-windows` held-out windows):\n")
        a("```text")
        for h in ev["val_history"]:
            a(f"step {h['step']}: main {h['loss_main']:.4f} mtp {h['loss_mtp']:.4f} "
              f"agree {h['mtp_agreement']:.3f} acc {h['acc_main']:.3f}")
        a("```\n")
    a("## Measured by nextn (`tools/train/chat_eval.py`)\n")
    if nev:
        a(f"Through `nextn serve` (`/v1/chat/completions`), {nev['questions']} held-out questions, "
          f"{nev.get('threads', 2)} thread(s); load average {nev.get('load_before', 0):.1f} before, {nev.get('load_after', 0):.1f} "
          f"after; {nev.get('simd', '')}.\n")
        a("**Chat answers** (T = 0, max_tokens 128): an answer passes when it ends with an end-of-turn "
          "token before max_tokens (finish_reason `stop`) and mentions the question's subject "
          "(case-insensitive; for dotted Python names the last component counts).\n")
        srcs = sorted(k for k in nev["answers"] if k != "all")
        a("| model | " + " | ".join(srcs) + " | all |")
        a("|---|" + "---|" * (len(srcs) + 1))
        answers_table(nev["answers"], "nextn-tiny-chat", srcs, L)
        if base and "answers" in base:
            answers_table(base["answers"], "nextn-tiny (MiMo, no chat tuning)", srcs, L)
        al = nev["answers"]["all"]
        a(f"\nnextn-tiny-chat: {al['ended']}/{al['n']} ended before max_tokens, {al['mentions']}/{al['n']} "
          "mention the subject.")
        if base and "answers" in base:
            bl = base["answers"]["all"]
            a(f"nextn-tiny (MiMo): {bl['ended']}/{bl['n']} ended, {bl['mentions']}/{bl['n']} mention the subject.")
        a("")
        if "acceptance" in nev:
            a("**MTP acceptance per draft position** (`--mtp --num-mtp-tokens 3`, same questions, "
              "from each response's `timings.draft_accepted_per_pos` / `draft_drafted_per_pos`):\n")
            a("| temperature | pos 1 | pos 2 | pos 3 | decode tok/s | answers passing |")
            a("|---|---|---|---|---|---|")
            for t, acc in nev["acceptance"].items():
                pp = acc["per_pos"]
                a(f"| {t} | " + " | ".join(pct(pp[k]['accepted'], pp[k]['drafted']) for k in sorted(pp)) +
                  f" | {acc['decode_tok_s']:.1f} | {pct(acc['answers']['pass'], acc['answers']['n'])} |")
            a("")
        if "speed" in nev:
            sp = nev["speed"]
            a(f"**Decode speed** on the {len(nev.get('demo_prompts', [])) or 6} demo prompts (T = 0, 128 tokens max), "
              f"through the server, {len(sp['vanilla']['per_round'])} interleaved rounds; tok/s = all "
              "decoded tokens / all decode time (`timings.predicted_n` / `predicted_ms`):\n")
            a("| configuration | tok/s | per round | ratio to vanilla |")
            a("|---|---|---|---|")
            for k, s in sp.items():
                a(f"| {k} | {s['tok_s']:.1f} | {', '.join(f'{x:.1f}' for x in s['per_round'])} | "
                  f"{s['ratio_vs_vanilla']:.2f} |")
            a("")
        demo = nev.get("demo_answers", [])
        if demo:
            a("## Sample answers (greedy, through the server)\n")
            a("Demo prompts of the speed table: " + "; ".join(f"`{d['question']}`" for d in demo) + ".\n")
            for d in demo:
                if d["question"] == "Define cynic.":  # the run's answer mixed in a dated, offensive entry
                    a("**Define cynic.** (answer not reproduced here: it recombined a dated, offensive "
                      "Devil's Dictionary entry; it is in training/nextn_eval.json)\n")
                    continue
                a(f"**{d['question']}**\n")
                a("```text\n" + d["answer"] + "\n```\n")
    a("## Tests\n")
    a("`tests/train/test_chat_model.py` (ctest `train.test_chat_model`): the layout, nextn's chat-template "
      "rendering (= Jinja2) and tokenization of a chat prompt equal the trainer's, `nextn debug-logits` "
      "matches PyTorch's float32 forward on the exported BF16 weights (prefill, hidden, MTP, 8 greedy "
      "decode steps) on a single-turn and a multi-turn (> 64 tokens) prompt, and greedy `--mtp` "
      "N = 1..3 gives the plain greedy tokens. `tools/train/check_qwen35.py` checks the PyTorch model "
      "itself: chunked delta rule = recurrence, and export = tests/reference/numpy_qwen3_5.py "
      "(float64) = nextn on a random model.\n")
    a("## Reproduce\n")
    a(f"```sh\n{command or 'tools/train/reproduce.sh --chat --device cpu --minutes 75'}   # this model's recipe\n"
      "PY=python3 tools/train/reproduce.sh --chat --device cuda --minutes 10   # a CUDA PyTorch\n```\n")
    a("## Licence\n")
    a("Derived from models/nextn-tiny (GPL-compatible corpora) and the chat sources above (public "
      "domain, PSF-2.0, and the licences of the man pages' packages); treat it as a GPL-compatible "
      "research artefact for testing nextn.\n")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--chat", required=True)
    ap.add_argument("--out", default="models/nextn-tiny-chat")
    ap.add_argument("--nextn-eval", default="")
    ap.add_argument("--baseline-eval", default="")
    ap.add_argument("--hardware", default="")
    ap.add_argument("--machine", default="")
    ap.add_argument("--command", default="")
    ap.add_argument("--earlier", nargs="*", default=[],
                    help="the earlier stages' runs, in order, when --run continued from them")
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "training"), exist_ok=True)
    for fn in ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
               "tokenizer_config.json"):
        shutil.copy(os.path.join(args.run, fn), os.path.join(args.out, fn))
    for fn in ("train_log.txt", "eval.json"):
        shutil.copy(os.path.join(args.run, fn), os.path.join(args.out, "training", fn))
    shutil.copy(os.path.join(args.chat, "chat_stats.json"), os.path.join(args.out, "training", "chat_sources.json"))
    load = lambda p: json.load(open(p)) if p and os.path.exists(p) else None  # noqa: E731
    nev, base = load(args.nextn_eval), load(args.baseline_eval)
    for src, name in ((nev, "nextn_eval.json"), (base, "nextn_eval_mimo_baseline.json")):
        if src:
            with open(os.path.join(args.out, "training", name), "w") as f:
                json.dump(src, f, indent=2, ensure_ascii=False)
    ev = load(os.path.join(args.run, "eval.json"))
    stats = load(os.path.join(args.chat, "chat_stats.json"))
    config = load(os.path.join(args.run, "config.json"))
    earlier = []
    for i, run in enumerate(args.earlier, 1):
        for fn in ("train_log.txt", "eval.json"):
            shutil.copy(os.path.join(run, fn), os.path.join(args.out, "training", f"stage{i}_{fn}"))
        earlier.append(load(os.path.join(run, "eval.json")))
    card = render(ev, earlier, stats, config, nev, base, args.hardware, args.command, args.machine)
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(card)
    total = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(args.out) for fn in fns)
    print(f"{args.out}: {total/1e6:.2f} MB")


if __name__ == "__main__":
    main()
