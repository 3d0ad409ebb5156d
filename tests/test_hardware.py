"""typhoon.training.flops: CPU features, device and precision choice, the matmul peak, FLOPs of a step."""

import itertools

import pytest
import torch
from conftest import torch_threads_kept
from torch.utils.flop_counter import FlopCounterMode

from typhoon import machine
from typhoon.training import device_settings, flops

SAPPHIRE_RAPIDS_VM = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq avx512bw avx512vl avx_vnni avx512_bf16 avx512_fp16

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq avx512bw avx512vl avx_vnni avx512_bf16 avx512_fp16
"""
EPYC_AVX2 = "processor\t: 0\nmodel name\t: AMD EPYC 7B12\nflags\t\t: fpu sse sse2 avx fma avx2 sha_ni\n"
SAPPHIRE_RAPIDS_AMX = "model name\t: Intel Xeon Platinum 8480+\nflags\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics bf16\nCPU part\t: 0xd0c\n"


def features(text: str) -> machine.CpuFeatures:
    flags, model = machine.parse_cpuinfo(text)
    return machine.features_from_flags(flags, model, "test")


def test_cpu_features_from_cpuinfo_text():
    vm = features(SAPPHIRE_RAPIDS_VM)
    assert (vm.avx2, vm.avx512f, vm.avx512_bf16, vm.amx_bf16, vm.amx_tile) == (True, True, True, False, False)
    assert vm.model == "Intel(R) Xeon(R) Processor" and vm.native_bf16
    epyc = features(EPYC_AVX2)
    assert (epyc.avx2, epyc.avx512f, epyc.avx512_bf16, epyc.native_bf16) == (True, False, False, False)
    amx = features(SAPPHIRE_RAPIDS_AMX)
    assert amx.amx_bf16 and amx.amx_tile and amx.native_bf16
    arm = features(ARM)  # ARM's "bf16" flag is not an x86 bf16 unit
    assert not (arm.avx2 or arm.avx512f or arm.avx512_bf16 or arm.native_bf16)


def test_cpu_features_reads_the_file_and_falls_back_to_torch_capability(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(EPYC_AVX2)
    read = machine.cpu_features(cpuinfo)
    assert read.source == str(cpuinfo) and read.model == "AMD EPYC 7B12" and read.avx2 and not read.avx512f
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    fallback = machine.cpu_features(tmp_path / "missing")
    assert fallback.source == "torch capability AVX512"
    assert fallback.avx2 and fallback.avx512f and not fallback.native_bf16  # the capability says nothing of bf16


def test_device_resolution_prefers_cuda_then_mps_then_cpu(monkeypatch):
    for cuda, mps in itertools.product((True, False), repeat=2):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda mps=mps: mps)
        expected = "cuda" if cuda else "mps" if mps else "cpu"
        assert device_settings.resolve_device("auto").type == expected
    assert device_settings.resolve_device("cpu") == torch.device("cpu")
    assert device_settings.resolve_device("cuda:1") == torch.device("cuda:1")
    with pytest.raises(ValueError, match=r"device must be one of \[.auto., .cpu., .cuda., .cuda:N., .mps.\], got .tpu."):
        device_settings.resolve_device("tpu")


def test_precision_choice_and_its_reason():
    cpu = torch.device("cpu")
    fp32 = device_settings.choose_precision("auto", cpu, features(EPYC_AVX2))
    assert (fp32.name, fp32.reason, fp32.bf16) == ("fp32", "no AVX512-BF16/AMX: fp32", False)
    amx = device_settings.choose_precision("auto", cpu, features(SAPPHIRE_RAPIDS_AMX))
    assert (amx.name, amx.reason) == ("bf16", "AMX-BF16: bf16 autocast")
    assert device_settings.choose_precision("fp32", cpu, features(SAPPHIRE_RAPIDS_AMX)) == device_settings.Precision("fp32", "requested")
    assert device_settings.choose_precision("bf16", cpu, features(EPYC_AVX2)).bf16
    assert device_settings.choose_precision("auto", torch.device("mps")).name == "fp32"
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        device_settings.choose_precision("fp16", cpu)


def test_avx512_bf16_keeps_bf16_only_where_its_measured_peak_wins():
    """AVX512-BF16 without AMX: bf16 products can be slower than fp32 (vdpbf16ps on one port), so the
    choice follows the measured peaks (given here) rather than the flag alone."""
    cpu, vm = torch.device("cpu"), features(SAPPHIRE_RAPIDS_VM)
    slow = device_settings.choose_precision("auto", cpu, vm, peaks={"fp32": 136.0, "bf16": 72.0})
    assert slow.name == "fp32"
    assert slow.reason == "AVX512-BF16 without AMX, but bf16 products (72 GFLOP/s) are not faster than fp32 (136): fp32"
    fast = device_settings.choose_precision("auto", cpu, vm, peaks={"fp32": 60.0, "bf16": 200.0})
    assert (fast.name, fast.reason) == ("bf16", "AVX512-BF16, bf16 products 200 GFLOP/s vs fp32 60: bf16 autocast")


def test_every_auto_is_resolved_once_into_the_settings_a_record_writes(monkeypatch):
    """resolve_settings: device, precision, kernels and threads of a config, each ``auto`` decided; the record's
    metrics entries and stored config come from that one object, and read back as the same numerics."""
    from types import SimpleNamespace

    from typhoon.config import RunConfig
    from typhoon.records import numerics_of_metrics, run_record

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    for cap in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"):
        monkeypatch.delenv(cap, raising=False)
    measured = []  # the threads each product peak is measured on: the run's, without changing this process's
    monkeypatch.setattr(device_settings, "matmul_peak", lambda dtype, threads=None: measured.append(
        (dtype, threads)) or SimpleNamespace(gflop_per_s={"fp32": 60.0, "bf16": 200.0}[dtype]))
    monkeypatch.setattr(device_settings, "cpu_features", lambda: features(SAPPHIRE_RAPIDS_VM))
    monkeypatch.setattr(machine, "cpu_features", lambda: features(SAPPHIRE_RAPIDS_VM))
    before = torch.get_num_threads()
    config = RunConfig(num_threads=3)  # device, precision, attention and dropout: auto
    settings = device_settings.resolve_settings(config)
    assert measured == [("fp32", 3), ("bf16", 3)] and torch.get_num_threads() == before
    assert settings == device_settings.RunSettings(
        torch.device("cpu"), device_settings.Precision("bf16", "AVX512-BF16, bf16 products 200 GFLOP/s vs fp32 60: "
                                                               "bf16 autocast"), "eager", "fast", 3)
    stored = settings.stored_config(config)
    assert {name: getattr(stored, name) for name in run_record.RESOLVED_FIELDS} == {
        "precision": "bf16", "attention": "eager", "dropout": "fast"}
    assert (stored.device, stored.num_threads) == ("auto", 3)  # execution fields stay as asked
    record = settings.record()
    assert {k: v for k, v in record.items() if k != "numerics"} == {
        "device": "cpu", "precision": "bf16", "precision_reason": settings.precision.reason, "attention": "eager",
        "dropout": "fast", "threads": 3}
    assert record["numerics"] == {"precision": "bf16", "device": "cpu", "kernels": "avx512_bf16",
                                  "attention": "eager", "dropout": "fast"}
    assert numerics_of_metrics(record).kernel_label == "bf16 on cpu (avx512_bf16)"  # what a reader of it sees

    explicit = RunConfig(device="cpu", precision="fp32", attention="sdpa", dropout="native")
    measured.clear()
    kept = device_settings.resolve_settings(explicit)  # nothing to decide: nothing measured
    assert (kept.precision, kept.attention, kept.dropout, measured) == (
        device_settings.Precision("fp32", "requested"), "sdpa", "native", [])
    assert kept.threads == before and kept.stored_config(explicit) == explicit


def test_time_matmul_arithmetic_with_a_fake_clock():
    ticks = itertools.count()
    gflops = flops.time_matmul(64, 32, 16, torch.float32, torch.device("cpu"), repeats=2, min_seconds=0.5,
                                  clock=lambda: float(next(ticks)))  # every loop "takes" one second
    assert gflops == pytest.approx(2 * 64 * 32 * 16 / 1e9)


def test_matmul_peak_is_measured_cached_and_restores_threads():
    before = torch.get_num_threads()
    peak = flops.matmul_peak("fp32", threads=1, repeats=1, min_seconds=0.01)
    assert torch.get_num_threads() == before
    assert (peak.dtype, peak.threads, peak.device, peak.clock) == ("fp32", 1, "cpu", "cpu time x threads")
    assert set(peak.by_shape) == set(flops.PEAK_SHAPES)
    assert peak.gflop_per_s == max(peak.by_shape.values()) > 0
    assert flops.matmul_peak("fp32", threads=1, repeats=1, min_seconds=0.01) is peak
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        flops.matmul_peak("int8")



def test_torch_threads_sets_the_count_inside_and_restores_it_even_on_error():
    with torch_threads_kept():
        torch.set_num_threads(2)
        with machine.torch_threads(1):
            inside = torch.get_num_threads()
        with pytest.raises(RuntimeError), machine.torch_threads(1):
            raise RuntimeError("a failing block")
        after_error = torch.get_num_threads()
        with machine.torch_threads():  # None: the count is left as it is, and restored
            unchanged = torch.get_num_threads()
            torch.set_num_threads(1)
        assert (inside, after_error, unchanged, torch.get_num_threads()) == (1, 2, 2, 2)

def test_matmul_peak_is_cached_per_thread_count():
    # A run on one thread, in a process that measured the peak on two, records the one-thread peak (a
    # cache keyed on the unresolved default handed it the two-thread one, with threads=2 in its record)
    with torch_threads_kept():
        torch.set_num_threads(2)
        on_two = flops.matmul_peak("fp32", repeats=1, min_seconds=0.01)
        torch.set_num_threads(1)
        on_one = flops.matmul_peak("fp32", repeats=1, min_seconds=0.01)
    assert (on_two.threads, on_one.threads) == (2, 1)
    assert flops.matmul_peak("fp32", threads=1, repeats=1, min_seconds=0.01) is on_one


# FLOPs against torch's own counter on real forward + backward passes -----------------------------

BERT = dict(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96)
DISTILBERT = dict(vocab_size=500, dim=64, n_layers=2, n_heads=4, hidden_dim=96)


def counted_flops(loss_fn) -> int:
    with FlopCounterMode(display=False) as counter:
        loss_fn()
    return counter.get_total_flops()


def random_inputs(rows: int, width: int, lengths=None):
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 500, (rows, width), generator=gen)
    lengths = lengths or [width] * rows
    mask = (torch.arange(width) < torch.tensor(lengths)[:, None]).long()
    return ids, mask


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_mlm_step_flops_match_torch_flop_counter(family):
    from transformers import (
        BertConfig,
        BertForMaskedLM,
        DistilBertConfig,
        DistilBertForMaskedLM,
    )

    from typhoon.models.mlm_head import MaskedLM
    cls, kwargs = (BertForMaskedLM, BERT) if family == "bert" else (DistilBertForMaskedLM, DISTILBERT)
    config_cls = BertConfig if family == "bert" else DistilBertConfig
    config = config_cls(**kwargs, attn_implementation="eager")
    torch.manual_seed(0)
    mlm = MaskedLM(cls(config)).train()
    ids, mask = random_inputs(3, 24)
    labels = torch.full_like(ids, -100)
    labels[:, ::5] = ids[:, ::5]
    selected = int((labels != -100).sum())
    training = counted_flops(lambda: mlm(input_ids=ids, attention_mask=mask, labels=labels).backward())
    assert flops.step_flops(config, [24] * 3, selected=selected) == pytest.approx(training, rel=0.02)
    with torch.no_grad():
        evaluation = counted_flops(lambda: mlm(input_ids=ids, attention_mask=mask, labels=labels))
    assert flops.step_flops(config, [24] * 3, selected=selected, backward=False) == pytest.approx(evaluation, rel=0.02)


@pytest.mark.parametrize("family", ["bert", "distilbert"])
def test_classifier_step_flops_match_torch_flop_counter(family):
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        DistilBertConfig,
        DistilBertForSequenceClassification,
    )
    cls, kwargs = (BertForSequenceClassification, BERT) if family == "bert" else (DistilBertForSequenceClassification, DISTILBERT)
    config = (BertConfig if family == "bert" else DistilBertConfig)(**kwargs, num_labels=3, attn_implementation="eager")
    torch.manual_seed(0)
    model = cls(config).train()
    ids, mask = random_inputs(4, 16)

    def step():
        logits = model(input_ids=ids, attention_mask=mask).logits
        torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2, 0])).backward()

    assert flops.step_flops(config, [16] * 4, num_labels=3) == pytest.approx(counted_flops(step), rel=0.02)


def test_useful_flops_of_real_lengths_equal_the_rows_run_unpadded():
    """Given the real lengths, the count is the work of the rows without their padding."""
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
    )
    config = BertConfig(**BERT, num_labels=2, attn_implementation="eager")
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    lengths = [7, 19, 12]
    ids, _ = random_inputs(3, 19)
    with torch.no_grad():
        unpadded = sum(counted_flops(lambda n=n, row=row: model(input_ids=ids[row:row + 1, :n]))
                       for row, n in enumerate(lengths))
        padded = counted_flops(lambda: model(input_ids=ids, attention_mask=random_inputs(3, 19, lengths)[1]))
    assert flops.step_flops(config, lengths, num_labels=2, backward=False) == pytest.approx(unpadded, rel=0.02)
    assert flops.step_flops(config, [19] * 3, num_labels=2, backward=False) == pytest.approx(padded, rel=0.02)


def test_minilm_encoder_has_the_issue_s_10_6_m_matmul_parameters():
    shape = flops.EncoderShape(hidden=384, layers=6, intermediate=1536, vocab=30522)
    assert shape.matmul_parameters == 10_616_832
    with pytest.raises(ValueError, match="cannot read encoder sizes"):
        flops.EncoderShape.from_config(object())
    with pytest.raises(ValueError, match="selected and num_labels must be >= 0"):
        flops.step_flops(shape, [8], selected=-1)


def test_phase_meter_counts_useful_and_executed_work():
    from transformers import (
        BertConfig,
    )
    config = BertConfig(**BERT)
    meter = flops.PhaseMeter(config).start()
    mask = random_inputs(3, 16, [16, 9, 4])[1]
    meter.add(mask, selected=5)
    meter.add(mask, num_labels=2, backward=False)
    meter.stop()
    useful = flops.step_flops(config, [16, 9, 4], selected=5) + flops.step_flops(config, [16, 9, 4], num_labels=2, backward=False)
    executed = flops.step_flops(config, [16] * 3, selected=5) + flops.step_flops(config, [16] * 3, num_labels=2, backward=False)
    assert (meter.useful, meter.executed) == (useful, executed)
    summary = meter.summary("ft")
    assert summary["ft_gflop"] == round(useful / 1e9, 3)
    assert summary["ft_gflop_per_s"] == useful / meter.wall_s / 1e9
    assert summary["ft_executed_gflop_per_s"] == executed / meter.wall_s / 1e9
    assert summary["ft_gflop_per_cpu_s"] == useful / meter.cpu_s / 1e9
    two_threads = flops.MatmulPeak("fp32", 2, "cpu", 100.0, {})
    fractions = flops.peak_fractions(summary, "ft", two_threads)
    assert fractions == {"ft_peak_fraction": summary["ft_gflop_per_s"] / 100.0,
                         "ft_cpu_peak_fraction": summary["ft_gflop_per_cpu_s"] * 2 / 100.0}
    gpu = flops.MatmulPeak("bf16", 1, "cuda", 1000.0, {})
    assert flops.peak_fractions(summary, "ft", gpu) == {"ft_peak_fraction": summary["ft_gflop_per_s"] / 1000.0}
