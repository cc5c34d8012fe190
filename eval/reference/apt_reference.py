"""Reference values for one APT exploration update, computed independently of the Rust code.

Float64 PyTorch transcription (written here, not imported) of URLB's APT, `icm_apt`, the
implementation the APT author maintains (his own mini_apt, Atari only, points to it):
    repo    github.com/rll-research/url_benchmark
    commit  bb98f0c6d78b3c467fb5a9fa5bbba3b7c0250397 (HEAD; the files below last changed in
            55167a453d76a188e5108dbe56084fcdf46e66be, "isort + yapf")
    agent/icm_apt.py  ICM (l.11-52: trunk Linear -> LayerNorm -> Tanh; forward_net and
                      backward_net; errors as L2 norms), ICMAPTAgent.update_icm (l.76-94),
                      compute_intr_reward (l.96-100: the kNN of icm.trunk(obs)), update
                      (l.102-148)
    agent/ddpg.py     Encoder (l.12-31: obs / 255 - 0.5), Actor (l.34-68: trunk Linear ->
                      LayerNorm -> Tanh, policy MLP, mu = tanh, TruncatedNormal(mu, std)),
                      Critic (l.71-117), DDPGAgent.update_critic (l.233-261), update_actor
                      (l.263-285)
    utils.py          soft_update_params (l.44-47), weight_init (l.59-69), TruncatedNormal
                      (l.128-149), RMS (l.257-276), PBE (l.279-319)
    agent/icm_apt.yaml  lr 1e-4, critic_target_tau 0.01, update_every_steps 2, feature 50,
                      hidden 1024, icm_rep_dim 512, stddev 0.2, clip 0.3, nstep 3, batch 1024,
                      knn_k 12, knn_avg true, knn_rms false, knn_clip 0.0
    pretrain.yaml     update_encoder true, num_seed_frames 4000, action_repeat 2 for pixels

Run with any Python that has torch and numpy (e.g. /work/torchvenv):
    python eval/reference/apt_reference.py
Writes eval/reference/apt_reference.json next to this file (deterministic: fixed seed, inputs
rounded to float32 first, float64 throughout).  Every listed gradient is torch's float64
autograd, checked here against central finite differences (h = 1e-6) on sampled coordinates of
every tensor, to 1e-6 relative; the script fails with AssertionError otherwise.

One update, `ICMAPTAgent.update` with reward_free = True and update_encoder = True (what
pretrain.yaml sets) at an agent step that is a multiple of update_every_steps:
  1. encode    h = conv(aug(obs) / 255 - 0.5) with gradient; h' = conv(aug(next_obs) / 255 -
               0.5) without (aug: replicate-pad 4, integer crop at the fixture's offsets; URLB's
               grid_sample shift computes the same pixels).  next_obs is O_{t+3} (3-step replay).
  2. icm       e = trunk(h), e' = trunk(h'); fwd = forward_net(cat(e, a)); act = backward_net(
               cat(e, e')); loss = mean_i ||e'_i - fwd_i||_2 + mean_i ||a_i - act_i||_2.
               The ICM's Adam and the encoder's Adam (lr 1e-4, betas 0.9/0.999, eps 1e-8) step.
  3. reward    rep = trunk_after(h) (h as computed in 1, before the encoder's step; the ICM
               trunk after its step), no gradient.  PBE: d_ij = ||rep_i - rep_j||_2 over the
               batch (B x B, the zero self-distance included), the k smallest per row; with
               knn_avg: all B k of them, divided by the running mean when knn_rms, minus
               knn_clip and floored at 0 when knn_clip >= 0, averaged over k per row;
               reward = log(1 + that).  icm_apt: k 12 (here 3), knn_rms false, clip 0.
  4. critic    DDPG on the detached features (the critic never trains the encoder here:
               update() passes obs.detach()): a' = clamp(mu'(h') + clip(0.2 eps_next, +-0.3),
               -1 + 1e-6, 1 - 1e-6); target = reward + discount min(Q1', Q2')(h', a');
               loss = mse(Q1(h, a), target) + mse(Q2(h, a), target); Adam over the critic.
  5. actor     a = clamp(mu(h) + clip(0.2 eps_actor, +-0.3)) (straight-through: d a / d mu = 1);
               loss = -mean(min(Q1, Q2)(h, a)) through the critic after its step; Adam over the
               actor.  No entropy term, no alpha.
  6. target    critic_target <- 0.01 critic + 0.99 critic_target (every update).
An agent step that is not a multiple of 2 does nothing.

Toy sizes (B 6, A 2, 10x10 images, 16 filters, 2 conv layers: 10 -> 4 -> 2, repr 64, ICM
representation 8 and hidden 8, trunk features 4, MLP hidden 8, k 3).

JSON layout (tensor names are lfs's; `upstream_names` maps each to URLB's module.state_dict
key; shapes are PyTorch's):
  source, sizes{batch, action, image, in_channels, num_filters, num_layers, repr, icm_rep,
    icm_hidden, feature, hidden, knn_k}, hyper{lr, betas, adam_eps, critic_target_tau,
    stddev, stddev_clip, input_offset, layer_norm_eps, pad, knn_avg, knn_rms, knn_clip},
    upstream_names
  inputs       obs, next_obs (B, 9, 10, 10) pixel values; obs_shift, next_obs_shift (B, 2)
               [x (column), y (row)]; action (B, A); extr_reward (B, 1) (unused while
               exploring); discount (B, 1) = 0.99^3; eps_next, eps_actor (B, A)
  params_before / params_after   {encoder (encoder.convnet.*), icm (icm.trunk.*,
               icm.forward_net.*, icm.backward_net.*), actor (trunk.*, policy.*), critic and
               critic_target (trunk.*, Q1.*, Q2.*)}
  augmented    obs, next_obs after the crop
  icm          h, next_h (B, repr), rep_obs, rep_next (B, icm_rep), forward_pred (B, icm_rep),
               backward_pred (B, A), forward_error, backward_error (B, 1), loss,
               grads{every encoder and icm tensor}, grad_h (B, repr)
  reward       rep (B, icm_rep), distances (B, B), knn (B, k) (sorted ascending), reward (B, 1)
  pbe_cases    [{knn_avg, knn_rms, knn_clip, calls: [{rep, rms_before{M, S, n}, rms_after,
               reward}]}]: the four combinations of knn_avg and knn_rms (clip 0.0001 with
               rms, as ind_apt/state_apt.yaml, else 0), two consecutive calls each (rep, then
               the ICM trunk of next_h) so the running mean's state carries
  critic       next_mu (B, A), next_action, target_q1, target_q2, target_q, q1, q2 (B, 1), loss,
               grads{critic}
  actor        mu, action (B, A), q1, q2, loss, grads{actor}
"""
import json
import math
import os
import platform

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

COMMIT = "bb98f0c6d78b3c467fb5a9fa5bbba3b7c0250397"
SEED = 20211210
B, A, IMG, IN_CH, FILTERS, LAYERS = 6, 2, 10, 9, 16, 2
ICM_REP, ICM_HID, FEAT, HID, KNN_K = 8, 8, 4, 8, 3
LR, BETAS, ADAM_EPS = 1e-4, (0.9, 0.999), 1e-8
GAMMA, NSTEP, CRITIC_TAU = 0.99, 3, 0.01
STDDEV, CLIP = 0.2, 0.3
INPUT_OFFSET = -0.5
LN_EPS = 1e-5
PAD = 4
H = 1e-6

UPSTREAM = {
    **{f"encoder.convnet.{2 * i}.{w}": f"encoder.convnet.{2 * i}.{w}" for i in range(LAYERS) for w in ("weight", "bias")},
    **{f"icm.{m}.{i}.{w}": f"icm.{m}.{i}.{w}" for m, idx in (("trunk", (0, 1)), ("forward_net", (0, 2)),
                                                             ("backward_net", (0, 2))) for i in idx for w in ("weight", "bias")},
    **{f"actor.{m}.{i}.{w}": f"actor.{m}.{i}.{w}" for m, idx in (("trunk", (0, 1)), ("policy", (0, 2, 4)))
       for i in idx for w in ("weight", "bias")},
    **{f"critic.{m}.{i}.{w}": f"critic.{m}.{i}.{w}" for m, idx in (("trunk", (0, 1)), ("Q1", (0, 2, 4)), ("Q2", (0, 2, 4)))
       for i in idx for w in ("weight", "bias")},
}


def conv_features(p, x):
    """ddpg.Encoder: ReLU convs on obs / 255 - 0.5 (stride 2, then 1), flattened (C, H, W)."""
    h = x / 255.0 + INPUT_OFFSET
    for i in range(LAYERS):
        h = F.relu(F.conv2d(h, p[f"encoder.convnet.{2 * i}.weight"], p[f"encoder.convnet.{2 * i}.bias"],
                            stride=2 if i == 0 else 1))
    return h.flatten(1)


def linear(p, name, x):
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def ln_tanh(p, pre, x):
    y = linear(p, pre + ".0", x)
    return torch.tanh(F.layer_norm(y, (y.shape[-1],), p[pre + ".1.weight"], p[pre + ".1.bias"], LN_EPS))


def mlp3(p, pre, x):
    x = F.relu(linear(p, pre + ".0", x))
    x = F.relu(linear(p, pre + ".2", x))
    return linear(p, pre + ".4", x)


def icm_forward(p, h, a, h_next):
    e, e_next = ln_tanh(p, "icm.trunk", h), ln_tanh(p, "icm.trunk", h_next)
    fwd = linear(p, "icm.forward_net.2", F.relu(linear(p, "icm.forward_net.0", torch.cat([e, a], -1))))
    act = torch.tanh(linear(p, "icm.backward_net.2", F.relu(linear(p, "icm.backward_net.0", torch.cat([e, e_next], -1)))))
    fe = torch.norm(e_next - fwd, dim=-1, p=2, keepdim=True)
    be = torch.norm(a - act, dim=-1, p=2, keepdim=True)
    return fe.mean() + be.mean(), (e, e_next, fwd, act, fe, be)


def actor_mu(p, h):
    return torch.tanh(mlp3(p, "actor.policy", ln_tanh(p, "actor.trunk", h)))


def truncated_sample(mu, eps):
    """utils.TruncatedNormal.sample(clip): mu + clamp(std eps, +-clip), clamped into
    (-1 + 1e-6, 1 - 1e-6) with a straight-through gradient."""
    x = mu + torch.clamp(eps * STDDEV, -CLIP, CLIP)
    clamped = torch.clamp(x, -1.0 + 1e-6, 1.0 - 1e-6)
    return x - x.detach() + clamped.detach()


def critic_q(p, pre, h, a):
    x = torch.cat([ln_tanh(p, pre + ".trunk", h), a], -1)
    return mlp3(p, pre + ".Q1", x), mlp3(p, pre + ".Q2", x)


class RMS:
    """utils.RMS: running mean M and variance S over every value seen (torch.var is unbiased)."""

    def __init__(self):
        self.M, self.S, self.n = torch.zeros(1), torch.ones(1), 1e-4

    def state(self):
        return {"M": self.M.item(), "S": self.S.item(), "n": self.n}

    def __call__(self, x):
        bs = x.size(0)
        delta = x.mean(0) - self.M
        new_m = self.M + delta * bs / (self.n + bs)
        new_s = (self.S * self.n + x.var(0) * bs + delta ** 2 * self.n * bs / (self.n + bs)) / (self.n + bs)
        self.M, self.S, self.n = new_m, new_s, self.n + bs
        return self.M, self.S


def pbe(rep, k, avg, rms, clip):
    """utils.PBE.__call__ with source = target = rep."""
    b = rep.shape[0]
    d = torch.norm(rep[:, None, :] - rep[None, :, :], dim=-1, p=2)
    knn, _ = d.topk(k, dim=1, largest=False, sorted=True)
    r = knn.reshape(-1, 1) if avg else knn[:, -1].reshape(-1, 1)
    if rms is not None:
        r = r / rms(r)[0]
    if clip >= 0.0:
        r = torch.maximum(r - clip, torch.zeros_like(r))
    if avg:
        r = r.reshape(b, k).mean(1, keepdim=True)
    return torch.log(r + 1.0), d, knn


def fd_check(name, f, tensors, grads, rng, per_tensor=6):
    worst = 0.0
    with torch.no_grad():
        for key, t in tensors.items():
            flat = t.view(-1)
            for j in rng.choice(flat.numel(), size=min(per_tensor, flat.numel()), replace=False):
                old = flat[j].item()
                flat[j] = old + H
                up = f().item()
                flat[j] = old - H
                down = f().item()
                flat[j] = old
                num, ana = (up - down) / (2 * H), grads[key].reshape(-1)[j].item()
                err = abs(num - ana) / max(abs(ana), 1e-3)
                assert err <= 1e-6, f"{name} d/d{key}[{j}]: autograd {ana} vs fd {num} ({err:.2e})"
                worst = max(worst, err)
    return worst


def adam_first_step(p, g):
    m_hat = (1 - BETAS[0]) * g / (1 - BETAS[0])
    v_hat = (1 - BETAS[1]) * g * g / (1 - BETAS[1])
    return p - LR * m_hat / (v_hat.sqrt() + ADAM_EPS)


def f32(a):
    return torch.tensor(np.asarray(a, dtype=np.float32).astype(np.float64))


def crop(x, shifts):
    xp = F.pad(x, (PAD,) * 4, mode="replicate")
    return torch.stack([xp[i, :, sy:sy + IMG, sx:sx + IMG] for i, (sx, sy) in enumerate(shifts)])


def main():
    rng = np.random.default_rng(SEED)
    normal = lambda shape, scale=1.0: f32(rng.normal(0.0, scale, size=shape))
    lin = lambda d, name, o, i, bias=0.1: d.update({name + ".weight": normal((o, i), 1.0 / math.sqrt(i)),
                                                    name + ".bias": normal((o,), bias)})
    ln = lambda d, name, n: d.update({name + ".weight": f32(1.0 + rng.normal(0.0, 0.2, size=n)),
                                      name + ".bias": normal((n,), 0.1)})

    enc, c_in = {}, IN_CH
    for i in range(LAYERS):
        enc[f"encoder.convnet.{2 * i}.weight"] = normal((FILTERS, c_in, 3, 3), math.sqrt(2.0 / (9 * c_in)))
        enc[f"encoder.convnet.{2 * i}.bias"] = normal((FILTERS,), 0.05)
        c_in = FILTERS
    side = IMG
    for i in range(LAYERS):
        side = (side - 3) // (2 if i == 0 else 1) + 1
    repr_dim = FILTERS * side * side
    icm = {}
    lin(icm, "icm.trunk.0", ICM_REP, repr_dim)
    ln(icm, "icm.trunk.1", ICM_REP)
    lin(icm, "icm.forward_net.0", ICM_HID, ICM_REP + A)
    lin(icm, "icm.forward_net.2", ICM_REP, ICM_HID)
    lin(icm, "icm.backward_net.0", ICM_HID, 2 * ICM_REP)
    lin(icm, "icm.backward_net.2", A, ICM_HID)

    def net(pre, heads):
        d = {}
        lin(d, f"{pre}.trunk.0", FEAT, repr_dim)
        ln(d, f"{pre}.trunk.1", FEAT)
        for head, i, o in heads:
            lin(d, f"{pre}.{head}.0", HID, i)
            lin(d, f"{pre}.{head}.2", HID, HID)
            lin(d, f"{pre}.{head}.4", o, HID)
        return d

    actor = net("actor", [("policy", FEAT, A)])
    actor["actor.policy.4.weight"] = f32(actor["actor.policy.4.weight"].numpy() * 0.3)  # |mu| well inside (-1, 1)
    critic = net("critic", [("Q1", FEAT + A, 1), ("Q2", FEAT + A, 1)])
    critic_target = {k: f32(v.numpy() + rng.normal(0.0, 0.02, size=v.shape)) for k, v in critic.items()}

    obs = torch.tensor(rng.integers(0, 256, size=(B, IN_CH, IMG, IMG)), dtype=torch.float64)
    next_obs = torch.tensor(rng.integers(0, 256, size=(B, IN_CH, IMG, IMG)), dtype=torch.float64)
    obs_shift = rng.integers(0, 2 * PAD + 1, size=(B, 2))
    next_shift = rng.integers(0, 2 * PAD + 1, size=(B, 2))
    obs_shift[0], next_shift[0] = (0, 8), (8, 0)
    action = f32(np.tanh(rng.normal(0.0, 1.0, size=(B, A))))
    extr_reward = normal((B, 1))
    discount = torch.full((B, 1), GAMMA ** NSTEP)
    eps_next, eps_actor = normal((B, A)), normal((B, A))
    eps_actor[0, 0], eps_next[1, 1] = 2.5, -3.0  # noise beyond the clip (0.2 x 2.5 > 0.3)

    check_rng = np.random.default_rng(SEED + 1)
    worst = {}
    L = lambda t: t.detach().tolist() if torch.is_tensor(t) else t
    group = lambda d: {k: L(v) for k, v in d.items()}
    out = {
        "source": f"rll-research/url_benchmark@{COMMIT} agent/icm_apt.py, agent/ddpg.py, utils.py, agent/icm_apt.yaml",
        "generated_with": f"Python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}",
        "sizes": {"batch": B, "action": A, "image": IMG, "in_channels": IN_CH, "num_filters": FILTERS,
                  "num_layers": LAYERS, "repr": repr_dim, "icm_rep": ICM_REP, "icm_hidden": ICM_HID, "feature": FEAT,
                  "hidden": HID, "knn_k": KNN_K},
        "hyper": {"lr": LR, "betas": list(BETAS), "adam_eps": ADAM_EPS, "critic_target_tau": CRITIC_TAU,
                  "stddev": STDDEV, "stddev_clip": CLIP, "input_offset": INPUT_OFFSET, "layer_norm_eps": LN_EPS,
                  "pad": PAD, "knn_avg": True, "knn_rms": False, "knn_clip": 0.0},
        "upstream_names": UPSTREAM,
        "inputs": {"obs": obs.int().tolist(), "next_obs": next_obs.int().tolist(), "obs_shift": obs_shift.tolist(),
                   "next_obs_shift": next_shift.tolist(), "action": L(action), "extr_reward": L(extr_reward),
                   "discount": L(discount), "eps_next": L(eps_next), "eps_actor": L(eps_actor)},
        "params_before": {"encoder": group(enc), "icm": group(icm), "actor": group(actor), "critic": group(critic),
                          "critic_target": group(critic_target)},
    }

    # 1. augment and encode
    obs_aug, next_aug = crop(obs, obs_shift), crop(next_obs, next_shift)
    out["augmented"] = {"obs": L(obs_aug), "next_obs": L(next_aug)}
    with torch.no_grad():
        h_next = conv_features(enc, next_aug)

    # 2. ICM update (the ICM's Adam and the encoder's Adam)
    leaves = {k: v.clone().requires_grad_(True) for k, v in {**enc, **icm}.items()}
    h = conv_features(leaves, obs_aug)
    h.retain_grad()
    loss, (e, e_next, fwd, act, fe, be) = icm_forward(leaves, h, action, h_next)
    loss.backward()
    grads = {k: v.grad.clone() for k, v in leaves.items()}
    worst["icm"] = fd_check("icm loss", lambda: icm_forward(leaves, conv_features(leaves, obs_aug), action, h_next)[0],
                            leaves, grads, check_rng)
    enc_after = {k: adam_first_step(enc[k], grads[k]) for k in enc}
    icm_after = {k: adam_first_step(icm[k], grads[k]) for k in icm}
    grad_h = h.grad.clone()
    h = h.detach()
    out["icm"] = {"h": L(h), "next_h": L(h_next), "rep_obs": L(e), "rep_next": L(e_next), "forward_pred": L(fwd),
                  "backward_pred": L(act), "forward_error": L(fe), "backward_error": L(be), "loss": loss.item(),
                  "grads": group(grads), "grad_h": L(grad_h)}

    # 3. intrinsic reward: the updated ICM trunk on the pre-step features of obs
    with torch.no_grad():
        rep = ln_tanh(icm_after, "icm.trunk", h)
        reward, dist, knn = pbe(rep, KNN_K, True, None, 0.0)
        rep_next = ln_tanh(icm_after, "icm.trunk", h_next)
    out["reward"] = {"rep": L(rep), "distances": L(dist), "knn": L(knn), "reward": L(reward)}
    cases = []
    for avg in (True, False):
        for use_rms in (False, True):
            clip = 0.0001 if use_rms else 0.0
            rms = RMS() if use_rms else None
            calls = []
            for r in (rep, rep_next):
                before = rms.state() if rms else None
                value = pbe(r, KNN_K, avg, rms, clip)[0]
                calls.append({"rep": L(r), "rms_before": before, "rms_after": rms.state() if rms else None,
                              "reward": L(value)})
            cases.append({"knn_avg": avg, "knn_rms": use_rms, "knn_clip": clip, "calls": calls})
    out["pbe_cases"] = cases

    # 4. critic (DDPG), on detached features
    with torch.no_grad():
        n_mu = actor_mu(actor, h_next)
        n_action = truncated_sample(n_mu, eps_next)
        tq1, tq2 = critic_q(critic_target, "critic", h_next, n_action)
        target = reward + discount * torch.min(tq1, tq2)

    def critic_loss(p):
        q1, q2 = critic_q(p, "critic", h, action)
        return F.mse_loss(q1, target) + F.mse_loss(q2, target), q1, q2

    cl = {k: v.clone().requires_grad_(True) for k, v in critic.items()}
    closs, q1, q2 = critic_loss(cl)
    closs.backward()
    c_grads = {k: v.grad.clone() for k, v in cl.items()}
    worst["critic"] = fd_check("critic loss", lambda: critic_loss(cl)[0], cl, c_grads, check_rng)
    critic_after = {k: adam_first_step(critic[k], c_grads[k]) for k in critic}
    out["critic"] = {"next_mu": L(n_mu), "next_action": L(n_action), "target_q1": L(tq1), "target_q2": L(tq2),
                     "target_q": L(target), "q1": L(q1), "q2": L(q2), "loss": closs.item(), "grads": group(c_grads)}

    # 5. actor
    def actor_loss(p):
        mu = actor_mu(p, h)
        a = truncated_sample(mu, eps_actor)
        aq1, aq2 = critic_q(critic_after, "critic", h, a)
        return -torch.min(aq1, aq2).mean(), (mu, a, aq1, aq2)

    al = {k: v.clone().requires_grad_(True) for k, v in actor.items()}
    aloss, (mu, a, aq1, aq2) = actor_loss(al)
    raw = mu + torch.clamp(eps_actor * STDDEV, -CLIP, CLIP)
    assert torch.all(raw.abs() < 1.0 - 1e-6), "an actor action lands on the clamp: finite differences would differ"
    aloss.backward()
    a_grads = {k: v.grad.clone() for k, v in al.items()}
    worst["actor"] = fd_check("actor loss", lambda: actor_loss(al)[0], al, a_grads, check_rng)
    actor_after = {k: adam_first_step(actor[k], a_grads[k]) for k in actor}
    out["actor"] = {"mu": L(mu), "action": L(a), "q1": L(aq1), "q2": L(aq2), "loss": aloss.item(),
                    "grads": group(a_grads)}

    # 6. critic target
    critic_target_after = {k: CRITIC_TAU * critic_after[k] + (1 - CRITIC_TAU) * critic_target[k] for k in critic}
    out["params_after"] = {"encoder": group(enc_after), "icm": group(icm_after), "actor": group(actor_after),
                           "critic": group(critic_after), "critic_target": group(critic_target_after)}

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apt_reference.json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path) / 1e3:.0f} kB); icm loss {loss.item():.6f}, "
          f"reward {reward.flatten().tolist()}, worst fd relative error {worst}")


if __name__ == "__main__":
    main()
