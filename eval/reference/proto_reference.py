"""Reference values for one Proto-RL exploration update, computed independently of the Rust code.

Float64 PyTorch transcription (written here, not imported) of Proto-RL (Denis Yarats et al.):
    repo    github.com/denisyarats/proto
    commit  e9899b422e5710d115eb22c13ff32d64cbcaa5c7 (HEAD; proto.py, utils.py and config.yaml
            unchanged since 85804304, "init")
    proto.py  Encoder (l.14-41: conv on obs / 255, no shift; forward = projector(conv)),
              Actor (l.44-69: pre_fc Linear -> LayerNorm, no tanh), Critic (l.72-93),
              Proto (l.96-187: predictor, protos, queue; forward l.118-137; compute_reward
              l.139-164; sinkhorn l.166-187, num_iters hard-coded to 3 at l.105),
              ProtoAgent.update_critic (l.280-297), update_actor_and_alpha (l.299-318),
              update_repr (l.320-328), compute_reward (l.330-334), update (l.336-374)
    utils.py  soft_update_params (l.34-37), weight_init (l.80-90), mlp (l.93-113),
              TanhTransform / SquashedNormal (l.177-221)
    config.yaml  T 0.1, topk 3, lr 1e-4, taus 0.05 (encoder) and 0.01 (critic), frequencies 2

Run with any Python that has torch and numpy (e.g. /work/torchvenv):
    python eval/reference/proto_reference.py
Writes eval/reference/proto_reference.json next to this file (deterministic: fixed seed, every
input rounded to float32 first so both sides start from the same numbers, then float64
throughout).  Every gradient the fixture lists is torch's float64 autograd, checked here against
central finite differences (h = 1e-6) on sampled coordinates of every tensor, to 1e-6 relative;
the script fails with AssertionError otherwise.

One update, `ProtoAgent.update` with task_agnostic = True (the exploration phase) at an even
agent step (1000), so every branch runs, in upstream's order:
  1. aug       obs and next_obs: replicate-pad 4, integer crop back to the image size at the
               fixture's offsets (kornia RandomCrop after ReplicationPad2d).
  2. repr      C <- normalize_rows(protos.weight), in place, outside autograd;
               z = projector(conv(obs / 255)); t = normalize(encoder_target(next_obs)) (no grad);
               s = normalize(predictor(z)); log_p = log_softmax(s C^T / T, 1);
               q = sinkhorn(t C^T) (no grad: Q = exp(S/T - max)^T / sum, 3 x {rows to 1/K,
               columns to 1/B}, columns to 1, transposed back);
               loss = -mean_i sum_k q_ik log_p_ik.
               One Adam (lr 1e-4, betas 0.9/0.999, eps 1e-8, no weight decay) over the conv
               encoder, the projector, the predictor and the prototypes steps it.
  3. target    encoder_target <- 0.05 encoder + 0.95 encoder_target (conv and projector).
  4. reward    C <- normalize_rows(protos.weight) again, in place (so the prototypes after the
               update are unit rows); y = projector(conv(next_obs / 255)) with the updated
               encoder; z = normalize(y); p = softmax((z C^T)^T, 1): for each prototype a
               distribution over the batch (no temperature); candidates[k] ~ p[k] (given here);
               queue[ptr : ptr + K] = z[candidates]; ptr = (ptr + K) mod Q;
               reward_i = the topk-th (3rd) smallest ||z_i - queue_j||_2 over the whole queue
               (the rows just written included, never-written zero rows included).
  5. features  h = conv(obs / 255), h' = conv(next_obs / 255), updated encoder, no gradient.
  6. critic    a' = tanh(mu' + std' eps_next), log pi(a'|h') (squashed Gaussian, the stable
               log-Jacobian 2 (log 2 - x - softplus(-2x)));
               target = reward + discount (min(Q1', Q2')(h', a') - alpha log pi(a'|h'));
               loss = mse(Q1(h, a), target) + mse(Q2(h, a), target); Adam over the critic.
  7. actor     a = tanh(mu + std eps_actor), loss = mean(alpha log pi(a|h) - min(Q1, Q2)(h, a))
               through the critic after its step, Adam over the actor;
     alpha     loss = mean(exp(log_alpha) (-log pi - target_entropy)), Adam over log_alpha;
               target_entropy = -|A|; alpha in the actor's and the critic's losses is
               exp(log_alpha) before this step.
  8. target    critic_target <- 0.01 critic + 0.99 critic_target.
On an odd step only 4-6 run (and 1): no representation, actor, alpha or target update.

Toy sizes (B 6, A 2, 10x10 images, 16 filters, 2 conv layers: 10 -> 4 -> 2, repr 64, latent
8, predictor hidden 16, K = 4 prototypes, queue 8 = 2K, topk 3, trunk features 4, MLP hidden
8).  The queue starts as upstream's does after one call: rows 0..K filled, rows K..2K zero,
ptr = K; `reward_fresh_queue` is the first call (all zero, ptr 0) on the same embeddings.

JSON layout (tensor names are lfs's; `upstream_names` maps each to Proto-RL's state_dict key;
shapes are PyTorch's: conv weights (out, in, 3, 3), Linear weights (out, in)):
  source, sizes{batch, action, image, in_channels, num_filters, num_layers, repr, latent,
    predictor_hidden, num_protos, queue, topk, feature, hidden}, hyper{temperature, lr, betas,
    adam_eps, discount, encoder_target_tau, critic_target_tau, log_std_min, log_std_max,
    target_entropy, layer_norm_eps, step, pad}, upstream_names{lfs: upstream}
  inputs       obs, next_obs (B, 9, 10, 10) pixel values 0..255; obs_shift, next_obs_shift
               (B, 2) crop offsets [x (column), y (row)] into the padded image; action (B, A);
               extr_reward (B, 1) (unused while exploring); discount (B, 1); eps_next,
               eps_actor (B, A) standard normal; candidates (K) batch rows; queue (Q, latent);
               queue_ptr
  params_before / params_after   {encoder (encoder.convnet.*, projector.*), encoder_target
               (same names), proto (predictor.*, protos.weight), actor (trunk.*, policy.*),
               critic and critic_target (trunk.*, Q1.*, Q2.*), log_alpha}
  augmented    obs, next_obs after the crop (B, 9, 10, 10)
  repr         protos_normalized (K, latent), z (B, latent), s, t (B, latent), log_p, q (B, K),
               loss, grads{every encoder and proto tensor}, grad_z (B, latent), grad_h (B, repr)
  reward       protos_normalized (the step's prototypes, renormalised), y (B, latent), z, p (K, B),
               queue_after, queue_ptr_after, distances (B, Q), reward (B, 1)
  reward_fresh_queue   the same for a zero queue at ptr 0 (queue, candidates, queue_after,
               queue_ptr_after, distances, reward)
  critic       obs_h, next_h (B, repr), next_mu, next_log_std (B, A), next_action,
               next_log_prob (B, 1), alpha, target_q1, target_q2, target_q, q1, q2 (B, 1), loss,
               grads{critic}
  actor        mu, log_std (B, A), action, log_prob (B, 1), q1, q2 (B, 1) (critic after its step),
               loss, grads{actor}
  alpha        loss, grad_log_alpha
"""
import json
import math
import os
import platform

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

COMMIT = "e9899b422e5710d115eb22c13ff32d64cbcaa5c7"
SEED = 20210222
B, A, IMG, IN_CH, FILTERS, LAYERS = 6, 2, 10, 9, 16, 2
LATENT, PRED_HID, K, QUEUE, TOPK, FEAT, HID = 8, 16, 4, 8, 3, 4, 8
T = 0.1
LR, BETAS, ADAM_EPS = 1e-4, (0.9, 0.999), 1e-8
DISCOUNT, ENC_TAU, CRITIC_TAU = 0.99, 0.05, 0.01
LOG_STD_MIN, LOG_STD_MAX = -10.0, 2.0
LN_EPS = 1e-5
PAD = 4
STEP = 1000
H = 1e-6

UPSTREAM = {
    **{f"encoder.convnet.{2 * i}.{w}": f"encoder.conv.{2 * i}.{w}" for i in range(LAYERS) for w in ("weight", "bias")},
    "projector.weight": "encoder.projector.weight", "projector.bias": "encoder.projector.bias",
    **{f"predictor.{i}.{w}": f"proto.predictor.{i}.{w}" for i in (0, 2) for w in ("weight", "bias")},
    "protos.weight": "proto.protos.weight",
    **{f"actor.trunk.{i}.{w}": f"actor.pre_fc.{i}.{w}" for i in (0, 1) for w in ("weight", "bias")},
    **{f"actor.policy.{i}.{w}": f"actor.fc.{i}.{w}" for i in (0, 2, 4) for w in ("weight", "bias")},
    **{f"critic.trunk.{i}.{w}": f"critic.pre_fc.{i}.{w}" for i in (0, 1) for w in ("weight", "bias")},
    **{f"critic.{q}.{i}.{w}": f"critic.{q}.{i}.{w}" for q in ("Q1", "Q2") for i in (0, 2, 4) for w in ("weight", "bias")},
    "log_alpha": "log_alpha",
}


# ---- networks (functional: p maps lfs names to tensors)

def conv_features(p, x):
    """Encoder.encode: ReLU convs on obs / 255 (stride 2, then 1), flattened (C, H, W)."""
    h = x / 255.0
    for i in range(LAYERS):
        h = F.relu(F.conv2d(h, p[f"encoder.convnet.{2 * i}.weight"], p[f"encoder.convnet.{2 * i}.bias"],
                            stride=2 if i == 0 else 1))
    return h.flatten(1)


def project(p, h):
    return h @ p["projector.weight"].T + p["projector.bias"]


def linear(p, name, x):
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def mlp3(p, pre, x):
    """utils.mlp with hidden_depth 2: Linear ReLU Linear ReLU Linear (indices 0, 2, 4)."""
    x = F.relu(linear(p, pre + ".0", x))
    x = F.relu(linear(p, pre + ".2", x))
    return linear(p, pre + ".4", x)


def trunk(p, pre, h):
    """pre_fc: Linear -> LayerNorm (no tanh in Proto-RL)."""
    y = linear(p, pre + ".0", h)
    return F.layer_norm(y, (y.shape[-1],), p[pre + ".1.weight"], p[pre + ".1.bias"], LN_EPS)


def actor_head(p, h):
    mu, raw = mlp3(p, "actor.policy", trunk(p, "actor.trunk", h)).chunk(2, dim=-1)
    log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(raw) + 1.0)
    return mu, log_std


def squashed_sample(mu, log_std, eps):
    """SquashedNormal.rsample and its log_prob (pre-tanh x cached, as TanhTransform's cache)."""
    std = log_std.exp()
    x = mu + std * eps
    normal_lp = -((x - mu) ** 2) / (2 * std ** 2) - log_std - math.log(math.sqrt(2 * math.pi))
    log_det = 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))
    return torch.tanh(x), (normal_lp - log_det).sum(-1, keepdim=True)


def critic_q(p, pre, h, a):
    x = torch.cat([trunk(p, pre + ".trunk", h), a], -1)
    return mlp3(p, pre + ".Q1", x), mlp3(p, pre + ".Q2", x)


def sinkhorn(scores):
    """Proto.sinkhorn (3 iterations; no infinities arise at these sizes)."""
    q = scores / T
    q = q - q.max()
    q = torch.exp(q).T
    q = q / q.sum()
    r = torch.ones(q.shape[0]) / q.shape[0]
    c = torch.ones(q.shape[1]) / q.shape[1]
    for _ in range(3):
        q = q * (r / q.sum(1)).unsqueeze(1)
        q = q * (c / q.sum(0)).unsqueeze(0)
    return (q / q.sum(0, keepdim=True)).T


def crop(x, shifts):
    xp = F.pad(x, (PAD,) * 4, mode="replicate")
    return torch.stack([xp[i, :, sy:sy + IMG, sx:sx + IMG] for i, (sx, sy) in enumerate(shifts)])


# ---- losses as functions of their trainable tensors (constants passed in), for autograd and FD

def repr_loss(p, obs_aug, t, c, q):
    z = project(p, conv_features(p, obs_aug))
    s = F.normalize(linear(p, "predictor.2", F.relu(linear(p, "predictor.0", z))), dim=1)
    log_p = F.log_softmax(s @ c.T / T, dim=1)
    return -(q * log_p).sum(1).mean(), z, s, log_p


def critic_loss(p, h, a, target):
    q1, q2 = critic_q(p, "critic", h, a)
    return F.mse_loss(q1, target) + F.mse_loss(q2, target), q1, q2


def actor_loss(pa, pc, h, eps, alpha):
    mu, log_std = actor_head(pa, h)
    a, log_prob = squashed_sample(mu, log_std, eps)
    q1, q2 = critic_q(pc, "critic", h, a)
    return (alpha * log_prob - torch.min(q1, q2)).mean(), (mu, log_std, a, log_prob, q1, q2)


# ---- checks

def fd_check(name, f, tensors, grads, rng, per_tensor=6):
    """Central differences of the scalar f() at sampled coordinates of each tensor in
    `tensors` (perturbed in place), against `grads`; returns the worst relative error."""
    worst = 0.0
    with torch.no_grad():
        for key, t in tensors.items():
            flat = t.view(-1)
            picks = rng.choice(flat.numel(), size=min(per_tensor, flat.numel()), replace=False)
            for j in picks:
                old = flat[j].item()
                flat[j] = old + H
                up = f().item()
                flat[j] = old - H
                down = f().item()
                flat[j] = old
                num = (up - down) / (2 * H)
                ana = grads[key].reshape(-1)[j].item()
                err = abs(num - ana) / max(abs(ana), 1e-3)
                assert err <= 1e-6, f"{name} d/d{key}[{j}]: autograd {ana} vs fd {num} ({err:.2e})"
                worst = max(worst, err)
    return worst


def adam_first_step(p, g):
    """torch.optim.Adam's first step from zero moments (bias-corrected: m_hat = g, v_hat = g^2)."""
    m = (1 - BETAS[0]) * g
    v = (1 - BETAS[1]) * g * g
    m_hat = m / (1 - BETAS[0])
    v_hat = v / (1 - BETAS[1])
    return p - LR * m_hat / (v_hat.sqrt() + ADAM_EPS)


def f32(a):
    return torch.tensor(np.asarray(a, dtype=np.float32).astype(np.float64))


def main():
    rng = np.random.default_rng(SEED)
    normal = lambda shape, scale=1.0: f32(rng.normal(0.0, scale, size=shape))

    # -- parameters: random (no LayerNorm gamma at 1, no bias at 0), rounded to float32
    enc = {}
    c_in = IN_CH
    for i in range(LAYERS):
        enc[f"encoder.convnet.{2 * i}.weight"] = normal((FILTERS, c_in, 3, 3), math.sqrt(2.0 / (9 * c_in)))
        enc[f"encoder.convnet.{2 * i}.bias"] = normal((FILTERS,), 0.05)
        c_in = FILTERS
    side = IMG
    for i in range(LAYERS):
        side = (side - 3) // (2 if i == 0 else 1) + 1
    repr_dim = FILTERS * side * side
    enc["projector.weight"] = normal((LATENT, repr_dim), 1.0 / math.sqrt(repr_dim))
    enc["projector.bias"] = normal((LATENT,), 0.1)
    enc_target = {k: f32(v.numpy() + rng.normal(0.0, 0.02, size=v.shape)) for k, v in enc.items()}
    proto = {"predictor.0.weight": normal((PRED_HID, LATENT), 1.0 / math.sqrt(LATENT)),
             "predictor.0.bias": normal((PRED_HID,), 0.1),
             "predictor.2.weight": normal((LATENT, PRED_HID), 1.0 / math.sqrt(PRED_HID)),
             "predictor.2.bias": normal((LATENT,), 0.1),
             "protos.weight": normal((K, LATENT), 0.5)}  # not unit rows: the update normalises them

    def net(pre, out_dims):
        d = {f"{pre}.trunk.0.weight": normal((FEAT, repr_dim), 1.0 / math.sqrt(repr_dim)),
             f"{pre}.trunk.0.bias": normal((FEAT,), 0.1),
             f"{pre}.trunk.1.weight": f32(1.0 + rng.normal(0.0, 0.2, size=FEAT)),
             f"{pre}.trunk.1.bias": normal((FEAT,), 0.1)}
        for head, i, o in out_dims:
            d.update({f"{pre}.{head}.0.weight": normal((HID, i), 1.0 / math.sqrt(i)), f"{pre}.{head}.0.bias": normal((HID,), 0.1),
                      f"{pre}.{head}.2.weight": normal((HID, HID), 1.0 / math.sqrt(HID)), f"{pre}.{head}.2.bias": normal((HID,), 0.1),
                      f"{pre}.{head}.4.weight": normal((o, HID), 1.0 / math.sqrt(HID)), f"{pre}.{head}.4.bias": normal((o,), 0.1)})
        return d

    actor = net("actor", [("policy", FEAT, 2 * A)])
    critic = net("critic", [("Q1", FEAT + A, 1), ("Q2", FEAT + A, 1)])
    critic_target = {k: f32(v.numpy() + rng.normal(0.0, 0.02, size=v.shape)) for k, v in critic.items()}
    log_alpha = f32(math.log(0.1))

    # -- inputs
    obs = torch.tensor(rng.integers(0, 256, size=(B, IN_CH, IMG, IMG)), dtype=torch.float64)
    next_obs = torch.tensor(rng.integers(0, 256, size=(B, IN_CH, IMG, IMG)), dtype=torch.float64)
    obs_shift = rng.integers(0, 2 * PAD + 1, size=(B, 2))
    next_shift = rng.integers(0, 2 * PAD + 1, size=(B, 2))
    obs_shift[0], next_shift[0] = (0, 8), (8, 0)  # both corners of the range
    action = f32(np.tanh(rng.normal(0.0, 1.0, size=(B, A))))
    extr_reward = normal((B, 1))
    discount = torch.full((B, 1), DISCOUNT)
    eps_next, eps_actor = normal((B, A)), normal((B, A))
    queue = torch.zeros(QUEUE, LATENT)
    queue[:K] = F.normalize(normal((K, LATENT)), dim=1)
    queue_ptr = K

    check_rng = np.random.default_rng(SEED + 1)
    worst = {}
    out = {
        "source": f"denisyarats/proto@{COMMIT} proto.py, utils.py, config.yaml",
        "generated_with": f"Python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}",
        "sizes": {"batch": B, "action": A, "image": IMG, "in_channels": IN_CH, "num_filters": FILTERS,
                  "num_layers": LAYERS, "repr": repr_dim, "latent": LATENT, "predictor_hidden": PRED_HID,
                  "num_protos": K, "queue": QUEUE, "topk": TOPK, "feature": FEAT, "hidden": HID},
        "hyper": {"temperature": T, "lr": LR, "betas": list(BETAS), "adam_eps": ADAM_EPS, "discount": DISCOUNT,
                  "encoder_target_tau": ENC_TAU, "critic_target_tau": CRITIC_TAU, "log_std_min": LOG_STD_MIN,
                  "log_std_max": LOG_STD_MAX, "target_entropy": -float(A), "layer_norm_eps": LN_EPS, "step": STEP,
                  "pad": PAD},
        "upstream_names": UPSTREAM,
    }
    L = lambda t: t.detach().tolist() if torch.is_tensor(t) else t
    group = lambda d: {k: L(v) for k, v in d.items()}
    out["params_before"] = {"encoder": group(enc), "encoder_target": group(enc_target), "proto": group(proto),
                            "actor": group(actor), "critic": group(critic), "critic_target": group(critic_target),
                            "log_alpha": log_alpha.item()}

    # 1. augmentation
    obs_aug, next_aug = crop(obs, obs_shift), crop(next_obs, next_shift)

    # 2. representation update
    c = F.normalize(proto["protos.weight"], dim=1)
    with torch.no_grad():
        t = F.normalize(project(enc_target, conv_features(enc_target, next_aug)), dim=1)
        q = sinkhorn(t @ c.T)
    leaves = {k: v.clone().requires_grad_(True) for k, v in {**enc, **proto, "protos.weight": c}.items()}
    h_obs = conv_features(leaves, obs_aug)
    h_obs.retain_grad()
    loss, z, s, log_p = repr_loss(leaves, obs_aug, t, leaves["protos.weight"], q)
    z.retain_grad()
    loss.backward()
    repr_grads = {k: v.grad.clone() for k, v in leaves.items()}
    worst["repr"] = fd_check("repr loss", lambda: repr_loss(leaves, obs_aug, t, leaves["protos.weight"], q)[0],
                             leaves, repr_grads, check_rng)
    enc_after = {k: adam_first_step(leaves[k].detach(), repr_grads[k]) for k in enc}
    proto_stepped = {k: adam_first_step(leaves[k].detach(), repr_grads[k]) for k in proto}
    out["augmented"] = {"obs": L(obs_aug), "next_obs": L(next_aug)}
    out["repr"] = {"protos_normalized": L(c), "z": L(z), "s": L(s), "t": L(t), "log_p": L(log_p), "q": L(q),
                   "loss": loss.item(), "grads": group(repr_grads), "grad_z": L(z.grad), "grad_h": L(h_obs.grad)}

    # 3. encoder target
    enc_target_after = {k: ENC_TAU * enc_after[k] + (1 - ENC_TAU) * enc_target[k] for k in enc}

    # 4. intrinsic reward
    def knn_reward(zn, c_now, queue_in, ptr, cand_rng):
        p = F.softmax((zn @ c_now.T).T, dim=1)  # (K, B)
        cand = np.array([cand_rng.choice(B, p=row / row.sum()) for row in p.numpy()])
        q_after = queue_in.clone()
        q_after[ptr:ptr + K] = zn[torch.tensor(cand)]
        dist = torch.norm(zn[:, None, :] - q_after[None, :, :], dim=2, p=2)
        reward = torch.topk(dist, TOPK, dim=1, largest=False)[0][:, -1:]
        return p, cand, q_after, (ptr + K) % QUEUE, dist, reward

    c_after = F.normalize(proto_stepped["protos.weight"], dim=1)
    proto_after = {**proto_stepped, "protos.weight": c_after}
    with torch.no_grad():
        y = project(enc_after, conv_features(enc_after, next_aug))
        zn = F.normalize(y, dim=1)
    p, cand, queue_after, ptr_after, dist, reward = knn_reward(zn, c_after, queue, queue_ptr, rng)
    out["inputs"] = {"obs": obs.int().tolist(), "next_obs": next_obs.int().tolist(), "obs_shift": obs_shift.tolist(),
                     "next_obs_shift": next_shift.tolist(), "action": L(action), "extr_reward": L(extr_reward),
                     "discount": L(discount), "eps_next": L(eps_next), "eps_actor": L(eps_actor),
                     "candidates": cand.tolist(), "queue": L(queue), "queue_ptr": queue_ptr}
    out["reward"] = {"protos_normalized": L(c_after), "y": L(y), "z": L(zn), "p": L(p), "queue_after": L(queue_after),
                     "queue_ptr_after": ptr_after, "distances": L(dist), "reward": L(reward)}
    fresh = torch.zeros(QUEUE, LATENT)
    _, f_cand, f_after, f_ptr, f_dist, f_reward = knn_reward(zn, c_after, fresh, 0, rng)
    out["reward_fresh_queue"] = {"queue": L(fresh), "queue_ptr": 0, "candidates": f_cand.tolist(),
                                 "queue_after": L(f_after), "queue_ptr_after": f_ptr, "distances": L(f_dist),
                                 "reward": L(f_reward)}

    # 5. features for SAC, from the updated encoder, without gradient
    with torch.no_grad():
        h, h_next = conv_features(enc_after, obs_aug), conv_features(enc_after, next_aug)

    # 6. critic
    alpha = log_alpha.exp().item()
    with torch.no_grad():
        n_mu, n_log_std = actor_head(actor, h_next)
        n_action, n_log_prob = squashed_sample(n_mu, n_log_std, eps_next)
        tq1, tq2 = critic_q(critic_target, "critic", h_next, n_action)
        target = reward + discount * (torch.min(tq1, tq2) - alpha * n_log_prob)
    cl = {k: v.clone().requires_grad_(True) for k, v in critic.items()}
    closs, q1, q2 = critic_loss(cl, h, action, target)
    closs.backward()
    c_grads = {k: v.grad.clone() for k, v in cl.items()}
    worst["critic"] = fd_check("critic loss", lambda: critic_loss(cl, h, action, target)[0], cl, c_grads, check_rng)
    critic_after = {k: adam_first_step(critic[k], c_grads[k]) for k in critic}
    out["critic"] = {"obs_h": L(h), "next_h": L(h_next), "next_mu": L(n_mu), "next_log_std": L(n_log_std),
                     "next_action": L(n_action), "next_log_prob": L(n_log_prob), "alpha": alpha,
                     "target_q1": L(tq1), "target_q2": L(tq2), "target_q": L(target), "q1": L(q1), "q2": L(q2),
                     "loss": closs.item(), "grads": group(c_grads)}

    # 7. actor and alpha
    al = {k: v.clone().requires_grad_(True) for k, v in actor.items()}
    aloss, (mu, log_std, a, log_prob, aq1, aq2) = actor_loss(al, critic_after, h, eps_actor, alpha)
    aloss.backward()
    a_grads = {k: v.grad.clone() for k, v in al.items()}
    worst["actor"] = fd_check("actor loss", lambda: actor_loss(al, critic_after, h, eps_actor, alpha)[0], al,
                              a_grads, check_rng)
    actor_after = {k: adam_first_step(actor[k], a_grads[k]) for k in actor}
    la = log_alpha.clone().requires_grad_(True)
    gap = (-log_prob - (-float(A))).detach()
    alpha_loss = (la.exp() * gap).mean()
    alpha_loss.backward()
    fd_la = ((math.exp(log_alpha.item() + H) - math.exp(log_alpha.item() - H)) * gap.mean().item()) / (2 * H)
    assert abs(fd_la - la.grad.item()) <= 1e-6 * abs(la.grad.item()), "alpha loss gradient"
    log_alpha_after = adam_first_step(log_alpha, la.grad)
    out["actor"] = {"mu": L(mu), "log_std": L(log_std), "action": L(a), "log_prob": L(log_prob), "q1": L(aq1),
                    "q2": L(aq2), "loss": aloss.item(), "grads": group(a_grads)}
    out["alpha"] = {"loss": alpha_loss.item(), "grad_log_alpha": la.grad.item()}

    # 8. critic target
    critic_target_after = {k: CRITIC_TAU * critic_after[k] + (1 - CRITIC_TAU) * critic_target[k] for k in critic}
    out["params_after"] = {"encoder": group(enc_after), "encoder_target": group(enc_target_after),
                           "proto": group(proto_after), "actor": group(actor_after), "critic": group(critic_after),
                           "critic_target": group(critic_target_after), "log_alpha": log_alpha_after.item()}

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto_reference.json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path) / 1e3:.0f} kB); repr loss {loss.item():.6f}, "
          f"reward {reward.flatten().tolist()}, worst fd relative error {worst}")


if __name__ == "__main__":
    main()
