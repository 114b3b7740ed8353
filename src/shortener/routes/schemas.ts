import { Type } from '@sinclair/typebox';

export const ErrorEnvelope = Type.Object({
  status: Type.Integer(),
  response: Type.String(),
  message: Type.String(),
});

export const CodeParams = Type.Object({ code: Type.String() });

export function envelope<T extends ReturnType<typeof Type.Object>>(data: T) {
  return Type.Object({
    status: Type.Integer(),
    response: Type.String(),
    message: Type.String(),
    data,
  });
}
